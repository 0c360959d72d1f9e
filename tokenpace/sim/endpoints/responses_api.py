"""The sim's OpenAI Responses dialect: ``POST /v1/responses``, its request and its typed events.

A stream: ``response.created`` and ``response.in_progress`` when admitted; per phase an output item
(``reasoning``, ``message`` or ``function_call``) announced by ``response.output_item.added`` and filled
by ``response.reasoning_text.delta`` / ``response.output_text.delta`` /
``response.function_call_arguments.delta``, closed by its ``.done`` events; then ``response.completed``
(or ``response.incomplete`` at ``max_output_tokens``) with the whole output and the usage. No [DONE].
"""

from __future__ import annotations

from typing import Any

import orjson

from tokenpace.sim.endpoints.api import ApiError, GenRequest, StreamDefaults, generation_from
from tokenpace.sim.endpoints.chunks import (
    ANSWER,
    REASONING,
    TOOL,
    TOOL_ARGS_CLOSE,
    TOOL_ARGS_OPEN,
    tool_arguments,
)
from tokenpace.sim.endpoints.tokens import chat_prompt_words, output_word


def parse_responses(
    body: dict[str, Any], default_model: str, max_len: int, defaults: StreamDefaults
) -> GenRequest:
    given = body.get("input")
    if isinstance(given, str):
        chat: list[dict[str, Any]] = [{"role": "user", "content": given}]
    elif isinstance(given, list) and given and all(isinstance(m, dict) for m in given):
        chat = [{"role": m.get("role", "user"), "content": m.get("content")} for m in given]
    else:
        raise ApiError(
            "'input' must be a string or a non-empty list of messages", param="input", code="invalid_type"
        )
    if isinstance(body.get("instructions"), str):
        chat.insert(0, {"role": "system", "content": body["instructions"]})
    try:
        prompt = chat_prompt_words(chat)
    except ValueError as e:
        raise ApiError(str(e), param="input", code="invalid_type") from None
    return generation_from(body, "responses", default_model, max_len, defaults, prompt)


def _text(start: int, end: int) -> str:
    return "".join(output_word(i) for i in range(start, end))


class ResponsesFormat:
    """One Responses response; keeps the open output item and the event sequence number."""

    __slots__ = (
        "_created",
        "_done",
        "_id",
        "_items",
        "_model",
        "_phase",
        "_prompt_tokens",
        "_reasoning",
        "_seq",
        "_start",
        "_tool_name",
    )

    def __init__(self, gen: GenRequest, rid: str, created: int) -> None:
        self._id, self._model, self._created = "resp_" + rid, gen.model, created
        self._prompt_tokens, self._reasoning, self._tool_name = len(gen.prompt), gen.reasoning, gen.tool_name
        self._seq = 0
        self._phase = 0  # phase of the open output item (0: none)
        self._start = 0  # token index (0-based) where the open item began
        self._done = 0  # tokens delivered so far
        self._items: list[dict[str, Any]] = []  # finished output items

    def _event(self, kind: str, fields: dict[str, Any]) -> bytes:
        fields["type"] = kind
        fields["sequence_number"] = self._seq
        self._seq += 1
        return b"event: " + kind.encode() + b"\ndata: " + orjson.dumps(fields) + b"\n\n"

    def _response(
        self, status: str, usage: dict[str, Any] | None, reason: str | None = None
    ) -> dict[str, Any]:
        return {
            "id": self._id,
            "object": "response",
            "created_at": self._created,
            "status": status,
            "error": None,
            "incomplete_details": {"reason": reason} if reason else None,
            "instructions": None,
            "model": self._model,
            "output": list(self._items),
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "usage": usage,
            "metadata": {},
        }

    def opening(self) -> bytes:
        r = self._response("in_progress", None)
        return self._event("response.created", {"response": r}) + self._event(
            "response.in_progress", {"response": r}
        )

    def chunk(self, words: str, phase: int, last: bool, done: int) -> bytes:
        out = b""
        if phase != self._phase:
            out = self._close_item() + self._open_item(phase)
        self._done = done
        at = {"item_id": self._item_id(), "output_index": len(self._items)}
        if phase == TOOL:
            delta = (TOOL_ARGS_OPEN if out else "") + words + (TOOL_ARGS_CLOSE if last else "")
            return out + self._event("response.function_call_arguments.delta", {**at, "delta": delta})
        kind = "response.reasoning_text.delta" if phase == REASONING else "response.output_text.delta"
        return out + self._event(kind, {**at, "content_index": 0, "delta": words})

    def _item_id(self) -> str:
        prefix = {REASONING: "rs", ANSWER: "msg"}.get(self._phase, "fc")
        return f"{prefix}_{self._id}_{len(self._items)}"

    def _item(self, status: str) -> dict[str, Any]:
        text = _text(self._start, self._done)
        item: dict[str, Any] = {"id": self._item_id(), "status": status}
        if self._phase == REASONING:
            item.update(type="reasoning", summary=[], content=[{"type": "reasoning_text", "text": text}])
        elif self._phase == ANSWER:
            part = {"type": "output_text", "text": text, "annotations": []}
            item.update(type="message", role="assistant", content=[part] if status != "in_progress" else [])
        else:
            args = tool_arguments(text) if status != "in_progress" else ""
            item.update(
                type="function_call", call_id="call_" + self._id, name=self._tool_name, arguments=args
            )
        return item

    def _open_item(self, phase: int) -> bytes:
        self._phase, self._start = phase, self._done
        at = {"output_index": len(self._items)}
        out = self._event("response.output_item.added", {**at, "item": self._item("in_progress")})
        if phase == ANSWER:
            part = {"type": "output_text", "text": "", "annotations": []}
            out += self._event(
                "response.content_part.added",
                {**at, "item_id": self._item_id(), "content_index": 0, "part": part},
            )
        return out

    def _close_item(self) -> bytes:
        if not self._phase:
            return b""
        item = self._item("completed")
        at = {"item_id": item["id"], "output_index": len(self._items)}
        if self._phase == TOOL:
            out = self._event("response.function_call_arguments.done", {**at, "arguments": item["arguments"]})
        else:
            text = item["content"][0]["text"]
            kind = "response.reasoning_text.done" if self._phase == REASONING else "response.output_text.done"
            out = self._event(kind, {**at, "content_index": 0, "text": text})
            if self._phase == ANSWER:
                out += self._event(
                    "response.content_part.done", {**at, "content_index": 0, "part": item["content"][0]}
                )
        out += self._event("response.output_item.done", {"output_index": len(self._items), "item": item})
        self._items.append(item)
        self._phase = 0
        return out

    def _final(self, reason: str, prompt_tokens: int, n_out: int) -> tuple[str, dict[str, Any]]:
        usage = {
            "input_tokens": prompt_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": n_out,
            "output_tokens_details": {"reasoning_tokens": min(self._reasoning, n_out)},
            "total_tokens": prompt_tokens + n_out,
        }
        if reason == "length":
            return "response.incomplete", self._response("incomplete", usage, "max_output_tokens")
        return "response.completed", self._response("completed", usage)

    def closing(self, reason: str, prompt_tokens: int, n_out: int) -> bytes:
        self._done = n_out
        out = self._close_item()
        kind, response = self._final(reason, prompt_tokens, n_out)
        return out + self._event(kind, {"response": response})

    def malformed(self) -> bytes:
        return b'event: response.output_text.delta\ndata: {"type":"response.output_text.delta","delta":\n\n'

    def full_response(self, n_out: int, prompt_tokens: int, reason: str) -> bytes:
        r = min(self._reasoning, n_out)
        for phase, upto in ((REASONING, r), (TOOL if self._tool_name else ANSWER, n_out)):
            if upto > self._done:
                self._phase, self._start, self._done = phase, self._done, upto
                self._close_item()
        return orjson.dumps(self._final(reason, prompt_tokens, n_out)[1])
