"""One benchmark in one process: the load shapes (closed loop, rate, ramp, multi-turn sessions) driving
the client, and the run's summary. Uses app.run and app.watch."""
