"""The OpenAI dialect of the sim: request validation and the exact response and chunk shapes.

Chunk bytes are built from per-request templates (prefix + word + suffix) rather than serialising a
dict per token: the sim writes tens of thousands of chunks a second.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from tokenpace.sim.endpoints.tokens import chat_prompt_words

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
    reasoning: int = 0  # the first this many generated tokens are reasoning (chat-style APIs only)
    tool_name: str | None = None  # the request gave tools: the answer is a call to the first one
    per_chunk: int = 1  # tokens per streamed chunk
    every_usage: bool = False  # usage on every chunk (vLLM's stream_options.continuous_usage_stats)
    dimensions: int = 0  # embeddings: the vector's length
    input_lengths: tuple[int, ...] = ()  # embeddings: tokens of each input of a batch, in order
    client_limit: bool = True  # max_tokens came from the request, not the sim's default


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


@dataclass(frozen=True, slots=True)
class StreamDefaults:
    """What the profile or the sim's flags set for every request; a request's body may override it."""

    reasoning_tokens: int = 0
    tokens_per_chunk: int = 1
    usage_every_chunk: bool = False


def parse_generation(
    raw: bytes, kind: str, default_model: str, max_len: int, defaults: StreamDefaults | None = None
) -> GenRequest:
    body = load_json(raw)
    return generation_from(body, kind, default_model, max_len, defaults or StreamDefaults())


def tool_name_of(tools: Any) -> str | None:
    """The first tool's name (OpenAI chat nests it under "function"; Anthropic and Responses do not)."""
    if tools is None or tools == []:
        return None
    if not isinstance(tools, list) or not isinstance(tools[0], dict):
        raise ApiError("'tools' must be a list of objects", param="tools", code="invalid_type")
    first = tools[0]
    fn = first.get("function")
    name = fn.get("name") if isinstance(fn, dict) else first.get("name")
    if not isinstance(name, str) or not name:
        raise ApiError("each tool needs a string 'name'", param="tools", code="invalid_type")
    return name


def stream_shape(body: dict[str, Any], kind: str, defaults: StreamDefaults) -> dict[str, Any]:
    """Reasoning, tools and chunking of one request: its body's options over the sim's defaults."""
    reasoning = _int_field(body, "reasoning_tokens", 0)
    per_chunk = _int_field(body, "tokens_per_chunk", 1)
    opts = body.get("stream_options") or {}
    return {
        "reasoning": 0
        if kind == "completion"
        else (defaults.reasoning_tokens if reasoning is None else reasoning),
        "tool_name": None if kind == "completion" else tool_name_of(body.get("tools")),
        "per_chunk": defaults.tokens_per_chunk if per_chunk is None else per_chunk,
        "every_usage": defaults.usage_every_chunk
        or (isinstance(opts, dict) and bool(opts.get("continuous_usage_stats"))),
    }


def generation_from(
    body: dict[str, Any],
    kind: str,
    default_model: str,
    max_len: int,
    defaults: StreamDefaults,
    prompt: list[str] | None = None,
) -> GenRequest:
    """A generation request of any dialect; ``prompt`` is given by dialects that template their own."""
    if prompt is None:
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
    max_tokens = None
    for name in ("max_completion_tokens", "max_tokens", "max_output_tokens"):  # chat, Anthropic, Responses
        if max_tokens is None:
            max_tokens = _int_field(body, name, 1)
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
    client_limit = max_tokens is not None
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
    gen = GenRequest(
        kind,
        model,
        prompt,
        stream,
        bool(opts.get("include_usage")) and stream,
        max_tokens,
        min_tokens,
        bool(ignore_eos),
        **stream_shape(body, kind, defaults),
    )
    gen.client_limit = client_limit
    return gen
