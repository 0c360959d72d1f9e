"""OpenAI Realtime-style text over a WebSocket (``GET /v1/realtime``, upgraded).

Each request is one out-of-band ``response.create`` event carrying its own input (``"conversation":
"none"``), so a reused session's context never grows. TTFT = TTFAT = the first non-empty
``response.output_text.delta`` (beta servers: ``response.text.delta``) or function-call delta;
``response.done`` carries the usage and ends the request; an ``error`` event fails it.
"""

from __future__ import annotations

from typing import Any

from tokenpace.core.record import RequestRecord
from tokenpace.wire.dialects.base import ANSWER, ERROR, Sampling

_ANSWER_DELTAS = frozenset(
    {
        "response.output_text.delta",
        "response.text.delta",
        "response.output_audio_transcript.delta",
        "response.audio_transcript.delta",
        "response.function_call_arguments.delta",
    }
)


class OpenAIRealtime:
    name = "openai-realtime"
    api = "realtime"  # its key in the registry and its "api" label value
    operation = "chat"  # OpenTelemetry GenAI gen_ai.operation.name
    method = "GET"  # upgraded to a WebSocket
    path = "/realtime"
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
        chat = messages if messages is not None else [{"role": "user", "content": prompt}]
        items = [
            {
                "type": "message",
                "role": m.get("role", "user"),
                "content": [{"type": "input_text", "text": m.get("content") or ""}],
            }
            for m in chat
        ]
        response = {
            "conversation": "none",
            "output_modalities": ["text"],
            "max_output_tokens": max_tokens,
            "input": items,
        }
        return {"type": "response.create", "response": response}

    def classify(self, chunk: dict[str, Any], record: RequestRecord) -> int:
        kind = chunk.get("type")
        if kind in _ANSWER_DELTAS:
            return ANSWER if chunk.get("delta") else 0
        if kind == "response.done":
            response = chunk.get("response") or {}
            usage = response.get("usage") or {}
            if usage.get("input_tokens") is not None:
                record.prompt_tokens = usage["input_tokens"]
            if usage.get("output_tokens") is not None:
                record.output_tokens_server = usage["output_tokens"]
            details = response.get("status_details") or {}
            record.finish_reason = details.get("reason") or response.get("status") or "completed"
        elif kind == "error":
            return ERROR
        return 0

    def read_full(self, response: dict[str, Any], record: RequestRecord) -> int:
        return self.classify(response, record)
