"""Tests against real inference engines (llama-server; vLLM opt-in)."""
