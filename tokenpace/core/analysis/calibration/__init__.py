"""The simulator's calibration: the step-cost model fitted to measured loads, its observations, the
decode fit and joint solve, engine drift, step noise, the measured prefill table. Pure."""
