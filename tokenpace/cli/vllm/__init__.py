"""`vllm bench serve`'s flags accepted by `tokenpace bench` with vLLM's meaning: load and SLOs,
dataset, target and HTTP."""
