"""The engine model on a simulated clock: the offered load, streamed summaries, a run's summary, a
measured load replayed, a predicted sweep, replicas. Uses sim.model and sim.profiles."""
