"""OpenAI ``/v1/chat/completions``."""

from __future__ import annotations

from typing import Any

from tokenpace.adapters.dialects.base import ANSWER, ERROR, REASONING, Sampling, common_body, read_usage
from tokenpace.record import RequestRecord


class OpenAIChat:
    name = "openai-chat"
    path = "/chat/completions"

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
        if "usage" in chunk:
            read_usage(chunk, record)
        choices = chunk.get("choices")
        if not choices:
            return 0
        choice = choices[0]
        finish = choice.get("finish_reason")
        if finish:
            record.finish_reason = finish
        delta = choice.get("delta")
        if not delta:
            return 0
        return _flags(delta)

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
