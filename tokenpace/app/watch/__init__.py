"""What watches a run besides its records: the target checked before any load (preflight), the client's
own health, the garbage collector kept out of measured time, the engine's /metrics and connect
probes, and the client's hop of each trace. Uses core, adapters and the wire only."""
