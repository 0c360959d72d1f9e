"""The baseline library's commands: `runs`, `compare`, `check`, `history`, `baseline`, `ab`; their
shared store options and views."""
