"""The run commands: `bench`, `sweep`, `plan`, `report`; their options, the live progress and the end-
of-run dashboard."""
