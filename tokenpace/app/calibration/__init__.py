"""The simulator calibrated from measured runs, and a profile validated against them (`tokenpace sim
--calibrate`, `--validate`)."""
