"""tokenpace: how fast LLM services respond, measured offline (bench, sweep) and online (the gateway).
The layers and their rooms: ARCHITECTURE.md."""

__version__ = "0.1.0"
