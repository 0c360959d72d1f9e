"""Load from more than one process: worker processes (their pipe, their loss, their health), Ray
actors, and the factory that picks one process, workers or Ray for a run. Uses app.bench, app.run,
app.watch."""
