"""The run store's use cases: open it, save and import runs, compare two sides, the release gate
(check), a metric's history, and a replay's records read back. Uses app.bench and app.run."""
