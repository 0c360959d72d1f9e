"""The OpenAI dialect of the sim: request validation and the exact response and chunk shapes.

Chunk bytes are built from per-request templates (prefix + word + suffix) rather than serialising a
dict per token: the sim writes tens of thousands of chunks a second.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from tokenpace.sim.tokens import chat_prompt_words, output_text

DEFAULT_MAX_TOKENS = 256


class ApiError(Exception):
    def __init__(
        self,
        message: str,
        status: int = 400,
        type_: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message, self.status, self.type, self.param, self.code = message, status, type_, param, code

    def body(self) -> bytes:
        return error_body(self.message, self.type, self.param, self.code)


def error_body(message: str, type_: str, param: str | None = None, code: str | int | None = None) -> bytes:
    return orjson.dumps({"error": {"message": message, "type": type_, "param": param, "code": code}})


@dataclass(slots=True)
class GenRequest:
    kind: str  # "chat" | "completion"
    model: str
    prompt: list[str]
    stream: bool
    include_usage: bool
    max_tokens: int
    min_tokens: int
    ignore_eos: bool


def _int_field(body: dict[str, Any], name: str, minimum: int) -> int | None:
    v = body.get(name)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int):
        raise ApiError(f"'{name}' must be an integer", param=name, code="invalid_type")
    if v < minimum:
        raise ApiError(f"'{name}' must be at least {minimum}, got {v}", param=name, code="invalid_value")
    return v


def _completion_prompt(p: Any) -> list[str]:
    if isinstance(p, str):
        return p.split()
    if isinstance(p, list) and p and all(isinstance(x, int) and not isinstance(x, bool) for x in p):
        return [f"<{x}>" for x in p]  # token ids: one token each
    if isinstance(p, list) and len(p) == 1 and isinstance(p[0], str):
        return p[0].split()
    if isinstance(p, list) and len(p) > 1:
        raise ApiError(
            "batched prompts are not supported by the sim; send one prompt per request",
            param="prompt",
            code="unsupported_value",
        )
    raise ApiError(
        "'prompt' must be a string, a list with one string, or a list of token ids",
        param="prompt",
        code="invalid_type",
    )


def _messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    msgs = body.get("messages")
    if not isinstance(msgs, list) or not msgs:
        raise ApiError(
            "'messages' must be a non-empty list",
            param="messages",
            code="missing_required_parameter" if msgs is None else "invalid_type",
        )
    for m in msgs:
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise ApiError(
                "each message must be an object with a string 'role'", param="messages", code="invalid_type"
            )
    return msgs


def load_json(raw: bytes) -> dict[str, Any]:
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        raise ApiError(f"request body is not valid JSON: {e}", code="invalid_json") from None
    if not isinstance(body, dict):
        raise ApiError("request body must be a JSON object", code="invalid_json")
    return body


def prompt_of(body: dict[str, Any], kind: str) -> list[str]:
    if kind == "chat":
        try:
            return chat_prompt_words(_messages(body))
        except ValueError as e:
            raise ApiError(str(e), param="messages", code="invalid_type") from None
    if "prompt" not in body:
        raise ApiError("'prompt' is required", param="prompt", code="missing_required_parameter")
    return _completion_prompt(body["prompt"])


def parse_generation(raw: bytes, kind: str, default_model: str, max_len: int) -> GenRequest:
    body = load_json(raw)
    prompt = prompt_of(body, kind)
    model = body.get("model", default_model)
    if not isinstance(model, str):
        raise ApiError("'model' must be a string", param="model", code="invalid_type")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise ApiError("'stream' must be a boolean", param="stream", code="invalid_type")
    opts = body.get("stream_options") or {}
    if not isinstance(opts, dict):
        raise ApiError("'stream_options' must be an object", param="stream_options", code="invalid_type")
    max_tokens = _int_field(body, "max_completion_tokens", 1)
    if max_tokens is None:
        max_tokens = _int_field(body, "max_tokens", 1)
    min_tokens = _int_field(body, "min_tokens", 0) or 0
    n = _int_field(body, "n", 1)
    if n is not None and n > 1:
        raise ApiError("the sim generates one choice per request (n=1)", param="n", code="unsupported_value")
    room = max_len - len(prompt)
    if room < 1:
        raise ApiError(
            f"This model's maximum context length is {max_len} tokens. However, your request has "
            f"{len(prompt)} input tokens.",
            param="messages" if kind == "chat" else "prompt",
            code="context_length_exceeded",
        )
    if max_tokens is None:
        max_tokens = min(DEFAULT_MAX_TOKENS, room)
    elif max_tokens > room:
        raise ApiError(
            f"This model's maximum context length is {max_len} tokens. However, you requested "
            f"{len(prompt) + max_tokens} tokens ({len(prompt)} in the input, {max_tokens} for "
            "the completion).",
            param="max_tokens",
            code="context_length_exceeded",
        )
    if min_tokens > max_tokens:
        raise ApiError("'min_tokens' must not exceed 'max_tokens'", param="min_tokens", code="invalid_value")
    ignore_eos = body.get("ignore_eos", False)
    return GenRequest(
        kind,
        model,
        prompt,
        stream,
        bool(opts.get("include_usage")) and stream,
        max_tokens,
        min_tokens,
        bool(ignore_eos),
    )


class ChunkFormat:
    """The byte templates of one response: everything but the token is fixed per request."""

    __slots__ = ("_final", "_head", "_id", "_kind", "_model", "_tail", "created")

    def __init__(self, kind: str, rid: str, model: str, created: int) -> None:
        self._kind, self._model, self.created = kind, model, created
        m = orjson.dumps(model).decode()
        if kind == "chat":
            self._id = "chatcmpl-" + rid
            self._head = (
                f'data: {{"id":"{self._id}","object":"chat.completion.chunk","created":{created},'
                f'"model":{m},"choices":['
            ).encode()
            self._tail = b'"},"logprobs":null,"finish_reason":null}]}\n\n'
        else:
            self._id = "cmpl-" + rid
            self._head = (
                f'data: {{"id":"{self._id}","object":"text_completion","created":{created},'
                f'"model":{m},"choices":['
            ).encode()
            self._tail = b'","logprobs":null,"finish_reason":null}]}\n\n'

    def role(self) -> bytes:
        """Chat's opening chunk: the role, no content (carries no token)."""
        return (
            self._head + b'{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,'
            b'"finish_reason":null}]}\n\n'
        )

    def token(self, word: str) -> bytes:
        if self._kind == "chat":
            return self._head + b'{"index":0,"delta":{"content":"' + word.encode() + self._tail
        return self._head + b'{"index":0,"text":"' + word.encode() + self._tail

    def finish(self, reason: str) -> bytes:
        if self._kind == "chat":
            choice = b'{"index":0,"delta":{},"logprobs":null,"finish_reason":"' + reason.encode() + b'"}'
        else:
            choice = b'{"index":0,"text":"","logprobs":null,"finish_reason":"' + reason.encode() + b'"}'
        return self._head + choice + b"]}\n\n"

    def usage(self, prompt_tokens: int, completion_tokens: int) -> bytes:
        u = orjson.dumps(usage(prompt_tokens, completion_tokens))
        return self._head + b'],"usage":' + u + b"}\n\n"

    def malformed(self) -> bytes:
        """A chunk whose JSON is cut short, as a buggy proxy or engine sometimes sends."""
        return self._head + b'{"index":0,"delta":{"content":\n\n'

    def full_response(self, n_out: int, prompt_tokens: int, reason: str) -> bytes:
        text = output_text(n_out)
        if self._kind == "chat":
            obj, choice = (
                "chat.completion",
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "logprobs": None,
                    "finish_reason": reason,
                },
            )
        else:
            obj, choice = (
                "text_completion",
                {"index": 0, "text": text, "logprobs": None, "finish_reason": reason},
            )
        return orjson.dumps(
            {
                "id": self._id,
                "object": obj,
                "created": self.created,
                "model": self._model,
                "choices": [choice],
                "usage": usage(prompt_tokens, n_out),
            }
        )


def usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
