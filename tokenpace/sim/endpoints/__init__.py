"""The engine served over HTTP: one module per API dialect (OpenAI, Anthropic, Responses, embeddings,
Realtime), byte shapes and token delivery, vLLM-named /metrics, OTLP spans, faults on demand, the
timing self-check."""
