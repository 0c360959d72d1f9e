"""The sim's Anthropic Messages dialect: ``POST /v1/messages``, its request and its event stream.

A stream: ``message_start`` and a ``ping`` when admitted; per phase a content block (``thinking``,
``text`` or ``tool_use``) opened by ``content_block_start``, filled by ``content_block_delta`` events
(``thinking_delta``, ``text_delta``, ``input_json_delta``) and closed by ``content_block_stop``; then
``message_delta`` (stop reason, output tokens) and ``message_stop``.
"""

from __future__ import annotations

from typing import Any

import orjson

from tokenpace.sim.endpoints.api import ApiError, GenRequest, StreamDefaults, generation_from
from tokenpace.sim.endpoints.chunks import (
    ANSWER,
    REASONING,
    TOOL_ARGS_CLOSE,
    TOOL_ARGS_OPEN,
    split_text,
    tool_arguments,
)
from tokenpace.sim.endpoints.tokens import chat_prompt_words

_STOP = {"length": "max_tokens", "stop": "end_turn"}
_DELTA = {REASONING: ("thinking_delta", "thinking"), ANSWER: ("text_delta", "text")}


def error_body(message: str, type_: str = "invalid_request_error") -> bytes:
    return orjson.dumps({"type": "error", "error": {"type": type_, "message": message}})


def parse_messages(
    body: dict[str, Any], default_model: str, max_len: int, defaults: StreamDefaults
) -> GenRequest:
    if body.get("max_tokens") is None:
        raise ApiError("max_tokens: Field required", param="max_tokens", code="missing_required_parameter")
    msgs = body.get("messages")
    if not isinstance(msgs, list) or not msgs or not all(isinstance(m, dict) for m in msgs):
        raise ApiError("messages: must be a non-empty list of objects", param="messages", code="invalid_type")
    system = body.get("system")
    chat = ([{"role": "system", "content": system}] if system else []) + msgs
    try:
        prompt = chat_prompt_words(chat)
    except ValueError as e:
        raise ApiError(str(e), param="messages", code="invalid_type") from None
    return generation_from(body, "anthropic", default_model, max_len, defaults, prompt)


def _event(kind: str, obj: dict[str, Any]) -> bytes:
    return b"event: " + kind.encode() + b"\ndata: " + orjson.dumps(obj) + b"\n\n"


class AnthropicFormat:
    """One Messages response; keeps which content block is open."""

    __slots__ = (
        "_block",
        "_id",
        "_index",
        "_model",
        "_prompt_tokens",
        "_reasoning",
        "_tool_name",
        "_tool_used",
    )

    def __init__(self, gen: GenRequest, rid: str, created: int) -> None:
        self._id, self._model, self._prompt_tokens = "msg_" + rid, gen.model, len(gen.prompt)
        self._reasoning, self._tool_name = gen.reasoning, gen.tool_name
        self._block = 0  # phase of the open block (0: none)
        self._index = -1
        self._tool_used = False

    def opening(self) -> bytes:
        message: dict[str, Any] = {
            "id": self._id,
            "type": "message",
            "role": "assistant",
            "model": self._model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": self._prompt_tokens, "output_tokens": 0},
        }
        return _event("message_start", {"type": "message_start", "message": message}) + _event(
            "ping", {"type": "ping"}
        )

    def chunk(self, words: str, phase: int, last: bool, done: int) -> bytes:
        out = b""
        if phase != self._block:
            out = self._close_block() + self._open_block(phase)
        if phase in _DELTA:
            kind, key = _DELTA[phase]
            delta = {"type": kind, key: words}
        else:
            text = (TOOL_ARGS_OPEN if out else "") + words + (TOOL_ARGS_CLOSE if last else "")
            delta = {"type": "input_json_delta", "partial_json": text}
        return out + _event(
            "content_block_delta", {"type": "content_block_delta", "index": self._index, "delta": delta}
        )

    def _open_block(self, phase: int) -> bytes:
        self._block, self._index = phase, self._index + 1
        if phase == REASONING:
            block: dict[str, Any] = {"type": "thinking", "thinking": "", "signature": ""}
        elif phase == ANSWER:
            block = {"type": "text", "text": ""}
        else:
            self._tool_used = True
            block = {"type": "tool_use", "id": "toolu_" + self._id, "name": self._tool_name, "input": {}}
        start = {"type": "content_block_start", "index": self._index, "content_block": block}
        return _event("content_block_start", start)

    def _close_block(self) -> bytes:
        if not self._block:
            return b""
        self._block = 0
        return _event("content_block_stop", {"type": "content_block_stop", "index": self._index})

    def _stop_reason(self, reason: str) -> str:
        return "tool_use" if self._tool_used and reason == "stop" else _STOP.get(reason, reason)

    def closing(self, reason: str, prompt_tokens: int, n_out: int) -> bytes:
        delta = {"stop_reason": self._stop_reason(reason), "stop_sequence": None}
        end = {"type": "message_delta", "delta": delta, "usage": {"output_tokens": n_out}}
        return (
            self._close_block()
            + _event("message_delta", end)
            + _event("message_stop", {"type": "message_stop"})
        )

    def malformed(self) -> bytes:
        return b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":\n\n'

    def full_response(self, n_out: int, prompt_tokens: int, reason: str) -> bytes:
        reasoning, text = split_text(n_out, self._reasoning)
        content: list[dict[str, Any]] = []
        if reasoning:
            content.append({"type": "thinking", "thinking": reasoning, "signature": ""})
        if text and self._tool_name is not None:
            self._tool_used = True
            args = orjson.loads(tool_arguments(text))
            content.append(
                {"type": "tool_use", "id": "toolu_" + self._id, "name": self._tool_name, "input": args}
            )
        elif text:
            content.append({"type": "text", "text": text})
        return orjson.dumps(
            {
                "id": self._id,
                "type": "message",
                "role": "assistant",
                "model": self._model,
                "content": content,
                "stop_reason": self._stop_reason(reason),
                "stop_sequence": None,
                "usage": {"input_tokens": prompt_tokens, "output_tokens": n_out},
            }
        )
