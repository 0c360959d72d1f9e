"""Engine profiles: the shipped ones (profiles.json), TOML profile files, and a calibrated profile
written in their schema. The bottom of the simulator."""
