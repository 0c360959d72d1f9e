"""OpenAI ``/v1/chat/completions``."""

from __future__ import annotations

from typing import Any

from tokenpace.core.record import RequestRecord
from tokenpace.wire.dialects.base import (
    ANSWER,
    ERROR,
    REASONING,
    Sampling,
    common_body,
    first_choice,
    read_usage,
)


class OpenAIChat:
    name = "openai-chat"
    api = "chat"  # its key in the registry and its "api" label value
    operation = "chat"  # OpenTelemetry GenAI gen_ai.operation.name
    method = "POST"
    path = "/chat/completions"
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
        body = common_body(model, max_tokens, sampling, stream)
        body["messages"] = messages if messages is not None else [{"role": "user", "content": prompt}]
        return body

    def classify(self, chunk: dict[str, Any], record: RequestRecord) -> int:
        if "error" in chunk:
            return ERROR
        choice = first_choice(chunk, record)
        delta = choice.get("delta") if choice else None
        return _flags(delta) if delta else 0

    def read_full(self, response: dict[str, Any], record: RequestRecord) -> int:
        if "error" in response:
            return ERROR
        read_usage(response, record)
        choices = response.get("choices") or [{}]
        record.finish_reason = choices[0].get("finish_reason")
        return _flags(choices[0].get("message") or {})


def _flags(message: dict[str, Any]) -> int:
    flags = 0
    if message.get("content") or message.get("tool_calls"):
        flags |= ANSWER
    # vLLM and DeepSeek say reasoning_content; newer vLLM and OpenRouter say reasoning.
    if message.get("reasoning_content") or message.get("reasoning"):
        flags |= REASONING
    return flags
