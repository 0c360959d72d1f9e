"""The statistics every verdict stands on: the decision rule, noise between runs, a percentile's change
between sides, rank tests, bootstrap, repeat groups, rates with intervals, per-request samples,
change points. Pure; imports no other analysis room."""
