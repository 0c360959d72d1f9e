"""The use cases, one room per job: a run's lifecycle (watch, run, bench, workers, jobs), sweeps, the
baseline library, rollouts, selection, calibration, serving. Owns a run end to end; callable from
Python (app/api.py)."""
