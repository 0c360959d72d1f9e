"""OpenAI ``/v1/embeddings``: one input per request, never streamed.

A response carries no generated tokens: TTFT equals E2E (the whole vector arrives at once), output
tokens are 0 (from the server's usage), and a run's request throughput is inputs per second and its
total token throughput input tokens per second.
"""

from __future__ import annotations

from typing import Any

from tokenpace.core.record import RequestRecord
from tokenpace.wire.dialects.base import ANSWER, ERROR, Sampling


class OpenAIEmbeddings:
    name = "openai-embeddings"
    api = "embeddings"  # its key in the registry and its "api" label value
    operation = "embeddings"  # OpenTelemetry GenAI gen_ai.operation.name
    method = "POST"
    path = "/embeddings"
    headers: tuple[tuple[str, str], ...] = ()

    def body(
        self,
        prompt: str,
        max_tokens: int,
        model: str,
        sampling: Sampling,
        stream: bool,
        messages: list[dict[str, str]] | None = None,
    ) -> dict[str, Any]:
        text = "\n".join(m.get("content") or "" for m in messages) if messages else prompt
        return {"model": model, "input": text, "encoding_format": "float"}

    def classify(self, chunk: dict[str, Any], record: RequestRecord) -> int:
        return self.read_full(chunk, record)  # a server never streams embeddings; read it whole

    def read_full(self, response: dict[str, Any], record: RequestRecord) -> int:
        if "error" in response:
            return ERROR
        usage = response.get("usage") or {}
        if usage.get("prompt_tokens") is not None:
            record.prompt_tokens = usage["prompt_tokens"]
        record.output_tokens_server = 0
        record.finish_reason = "stop"
        return ANSWER if response.get("data") else 0
