"""Long-running servers: the measuring gateway and the simulated engine served until stopped, the
engine started in its own process, and its set-up from options. Uses app.baseline, app.run,
app.watch."""
