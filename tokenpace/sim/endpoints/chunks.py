"""The sim's OpenAI byte shapes (chat and text completions), and what every wire format provides.

A response is written as: ``opening()`` when the request is admitted, ``chunk(words, phase, last)``
per delivered chunk (one or several tokens of one phase), ``closing(...)`` with the last chunk.
Chunk bytes are built from per-request templates rather than serialising a dict per token: the sim
writes tens of thousands of chunks a second.
"""

from __future__ import annotations

from typing import Any, Protocol

import orjson

from tokenpace.sim.endpoints.tokens import output_word

# What a delivered chunk carries.
REASONING = 1  # thinking before the answer
ANSWER = 2  # answer text
TOOL = 3  # a tool call's arguments (the answer when the request gave tools)

TOOL_ARGS_OPEN = '{"text":"'  # a tool call's arguments: one JSON object holding the generated words
TOOL_ARGS_CLOSE = '"}'
_OPEN = b'"logprobs":null,"finish_reason":null}'  # the end of a choice that has not finished


class WireFormat(Protocol):
    """One response's bytes in one API dialect (an object per request: it may keep state)."""

    def opening(self) -> bytes: ...

    def chunk(self, words: str, phase: int, last: bool, done: int) -> bytes: ...

    def closing(self, reason: str, prompt_tokens: int, n_out: int) -> bytes: ...

    def malformed(self) -> bytes: ...

    def full_response(self, n_out: int, prompt_tokens: int, reason: str) -> bytes: ...


def usage(prompt_tokens: int, completion_tokens: int, reasoning: int = 0) -> dict[str, Any]:
    out: dict[str, Any] = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
    if reasoning:
        out["completion_tokens_details"] = {"reasoning_tokens": reasoning}
    return out


def split_text(n_out: int, reasoning: int) -> tuple[str, str]:
    """(reasoning text, answer text) of a response of n_out tokens whose first ``reasoning`` think."""
    r = min(reasoning, n_out)
    return (
        "".join(output_word(i) for i in range(r)),
        "".join(output_word(i) for i in range(r, n_out)),
    )


def tool_arguments(answer: str) -> str:
    return TOOL_ARGS_OPEN + answer + TOOL_ARGS_CLOSE


class ChunkFormat:
    """OpenAI chat.completion.chunk / text_completion shapes for one response."""

    __slots__ = (
        "_answer_head",
        "_answer_tail",
        "_every_usage",
        "_head",
        "_id",
        "_include_usage",
        "_kind",
        "_model",
        "_prompt_tokens",
        "_reasoning",
        "_tool_name",
        "_tool_started",
        "created",
    )

    def __init__(
        self,
        kind: str,
        rid: str,
        model: str,
        created: int,
        *,
        reasoning: int = 0,
        tool_name: str | None = None,
        include_usage: bool = False,
        every_usage: bool = False,
        prompt_tokens: int = 0,
    ) -> None:
        self._kind, self._model, self.created = kind, model, created
        self._reasoning, self._tool_name, self._tool_started = reasoning, tool_name, False
        self._include_usage, self._every_usage = include_usage, every_usage
        self._prompt_tokens = prompt_tokens
        m = orjson.dumps(model).decode()
        self._id = ("chatcmpl-" if kind == "chat" else "cmpl-") + rid
        obj = "chat.completion.chunk" if kind == "chat" else "text_completion"
        self._head = (
            f'data: {{"id":"{self._id}","object":"{obj}","created":{created},"model":{m},"choices":['
        ).encode()
        field = b'{"index":0,"delta":{"content":"' if kind == "chat" else b'{"index":0,"text":"'
        self._answer_head = self._head + field
        self._answer_tail = (b'"},' if kind == "chat" else b'",') + _OPEN + b"]}\n\n"

    def opening(self) -> bytes:
        """Chat's opening chunk: the role, no content (carries no token)."""
        if self._kind != "chat":
            return b""
        return (
            self._head + b'{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,'
            b'"finish_reason":null}]}\n\n'
        )

    def chunk(self, words: str, phase: int, last: bool, done: int) -> bytes:
        if phase == ANSWER and not self._every_usage:  # the common case: one template concatenation
            return self._answer_head + words.encode() + self._answer_tail
        w = words.encode()
        if self._kind != "chat":
            choice = b'{"index":0,"text":"' + w + b'",' + _OPEN
        elif phase == ANSWER:
            choice = b'{"index":0,"delta":{"content":"' + w + b'"},' + _OPEN
        elif phase == REASONING:
            choice = b'{"index":0,"delta":{"reasoning_content":"' + w + b'"},' + _OPEN
        else:
            choice = b'{"index":0,"delta":{"tool_calls":[' + self._tool_delta(words, last) + b"]}," + _OPEN
        if self._every_usage:  # vLLM's continuous_usage_stats: usage so far on every chunk
            return self._head + choice + b'],"usage":' + self._usage_bytes(done) + b"}\n\n"
        return self._head + choice + b"]}\n\n"

    def _tool_delta(self, words: str, last: bool) -> bytes:
        args = words + TOOL_ARGS_CLOSE if last else words
        if self._tool_started:
            return b'{"index":0,"function":{"arguments":' + orjson.dumps(args) + b"}}"
        self._tool_started = True
        return (
            b'{"index":0,"id":"call_'
            + self._id.encode()
            + b'","type":"function","function":{"name":'
            + orjson.dumps(self._tool_name)
            + b',"arguments":'
            + orjson.dumps(TOOL_ARGS_OPEN + args)
            + b"}}"
        )

    def _usage_bytes(self, done: int) -> bytes:
        return orjson.dumps(usage(self._prompt_tokens, done, min(self._reasoning, done)))

    def _reason(self, reason: str) -> str:
        return "tool_calls" if self._tool_started and reason == "stop" else reason

    def closing(self, reason: str, prompt_tokens: int, n_out: int) -> bytes:
        r = self._reason(reason).encode()
        if self._kind == "chat":
            choice = b'{"index":0,"delta":{},"logprobs":null,"finish_reason":"' + r + b'"}'
        else:
            choice = b'{"index":0,"text":"","logprobs":null,"finish_reason":"' + r + b'"}'
        out = self._head + choice + b"]}\n\n"
        if self._include_usage:
            out += self._head + b'],"usage":' + self._usage_bytes(n_out) + b"}\n\n"
        return out + b"data: [DONE]\n\n"

    def malformed(self) -> bytes:
        """A chunk whose JSON is cut short, as a buggy proxy or engine sometimes sends."""
        return self._head + b'{"index":0,"delta":{"content":\n\n'

    def full_response(self, n_out: int, prompt_tokens: int, reason: str) -> bytes:
        reasoning, text = split_text(n_out, self._reasoning if self._kind == "chat" else 0)
        if self._kind == "chat":
            message: dict[str, Any] = {"role": "assistant", "content": text}
            if reasoning:
                message["reasoning_content"] = reasoning
            if self._tool_name is not None and text:
                self._tool_started = True
                message["content"] = None
                message["tool_calls"] = [
                    {
                        "id": "call_" + self._id,
                        "type": "function",
                        "function": {"name": self._tool_name, "arguments": tool_arguments(text)},
                    }
                ]
            obj = "chat.completion"
            choice: dict[str, Any] = {"index": 0, "message": message, "logprobs": None}
        else:
            obj, choice = "text_completion", {"index": 0, "text": text, "logprobs": None}
        choice["finish_reason"] = self._reason(reason)
        return orjson.dumps(
            {
                "id": self._id,
                "object": obj,
                "created": self.created,
                "model": self._model,
                "choices": [choice],
                "usage": usage(prompt_tokens, n_out, min(self._reasoning, n_out) if reasoning else 0),
            }
        )


def openai_format(gen: Any, rid: str, created: int) -> ChunkFormat:
    """The OpenAI chat or completions format of one parsed request (a sim.api.GenRequest)."""
    return ChunkFormat(
        gen.kind,
        rid,
        gen.model,
        created,
        reasoning=gen.reasoning,
        tool_name=gen.tool_name,
        include_usage=gen.include_usage,
        every_usage=gen.every_usage and gen.stream,
        prompt_tokens=len(gen.prompt),
    )
