"""Result files read back for reports and plans, and the tail of a run followed into its traces. Uses
the layers below the app only."""
