"""The engine model: requests, continuous batching one step at a time, the step-cost roofline and its
measured noise, the paged KV cache with prefix caching, lazy decode and fast-forward. Uses
sim.profiles; its hot modules are compiled (sim/native.py)."""
