"""Anthropic Messages ``/v1/messages``: typed events, thinking and tool-use blocks, usage at both ends.

TTFT is the first ``content_block_delta`` carrying text, thinking or tool-input JSON; TTFAT the first
carrying text or tool-input JSON. A block's start (``content_block_start``) carries no token.
"""

from __future__ import annotations

from typing import Any

from tokenpace.core.record import RequestRecord
from tokenpace.wire.dialects.base import ANSWER, ERROR, REASONING, Sampling

_DELTA_FLAGS = {"text_delta": ("text", ANSWER), "thinking_delta": ("thinking", REASONING)}
_DELTA_FLAGS["input_json_delta"] = ("partial_json", ANSWER)


class AnthropicMessages:
    name = "anthropic-messages"
    api = "anthropic"  # its key in the registry and its "api" label value
    operation = "chat"  # OpenTelemetry GenAI gen_ai.operation.name
    method = "POST"
    path = "/messages"
    headers = (("anthropic-version", "2023-06-01"),)

    def body(
        self,
        prompt: str,
        max_tokens: int,
        model: str,
        sampling: Sampling,
        stream: bool,
        messages: list[dict[str, str]] | None = None,
    ) -> dict[str, Any]:
        msgs = messages if messages is not None else [{"role": "user", "content": prompt}]
        body: dict[str, Any] = {
            "model": model,
            "max_tokens": max_tokens,
            "temperature": sampling.temperature,
            "stream": stream,
            "messages": [m for m in msgs if m.get("role") != "system"],
        }
        if sampling.top_p != 1.0:
            body["top_p"] = sampling.top_p  # newer models refuse temperature and top_p together
        system = "\n".join(m.get("content") or "" for m in msgs if m.get("role") == "system")
        if system:
            body["system"] = system
        return body

    def classify(self, chunk: dict[str, Any], record: RequestRecord) -> int:
        kind = chunk.get("type")
        if kind == "content_block_delta":
            delta = chunk["delta"]
            field_flag = _DELTA_FLAGS.get(delta.get("type"))
            return field_flag[1] if field_flag and delta.get(field_flag[0]) else 0
        if kind == "message_start":
            usage = chunk["message"].get("usage") or {}
            if usage.get("input_tokens") is not None:
                record.prompt_tokens = usage["input_tokens"] + (usage.get("cache_read_input_tokens") or 0)
        elif kind == "message_delta":
            _read_end(chunk.get("delta") or {}, chunk.get("usage") or {}, record)
        elif kind == "error":
            return ERROR
        return 0

    def read_full(self, response: dict[str, Any], record: RequestRecord) -> int:
        if response.get("type") == "error":
            return ERROR
        usage = response.get("usage") or {}
        if usage.get("input_tokens") is not None:
            record.prompt_tokens = usage["input_tokens"] + (usage.get("cache_read_input_tokens") or 0)
        _read_end(response, usage, record)
        flags = 0
        for block in response.get("content") or ():
            kind = block.get("type")
            if kind == "thinking" and block.get("thinking"):
                flags |= REASONING
            elif (kind == "text" and block.get("text")) or kind == "tool_use":
                flags |= ANSWER
        return flags


def _read_end(delta: dict[str, Any], usage: dict[str, Any], record: RequestRecord) -> None:
    if delta.get("stop_reason"):
        record.finish_reason = delta["stop_reason"]
    if usage.get("output_tokens") is not None:
        record.output_tokens_server = usage["output_tokens"]
