"""What every API dialect provides: the request body, and the meaning of each decoded chunk."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, cast

from tokenpace.core.record import RequestRecord

# Flags a dialect returns for one decoded chunk.
ANSWER = 1  # carries answer text or a tool call
REASONING = 2  # carries reasoning text
ERROR = 4  # the server reported an error inside the stream


@dataclass(frozen=True, slots=True)
class Sampling:
    temperature: float = 0.0
    top_p: float = 1.0
    ignore_eos: bool = False  # also sends min_tokens = max_tokens (vLLM, SGLang, TGI extensions)

    def to_dict(self) -> dict[str, Any]:
        return {"temperature": self.temperature, "top_p": self.top_p, "ignore_eos": self.ignore_eos}


class Dialect(Protocol):
    name: str  # written into a run's metadata, e.g. "openai-chat"
    api: str  # the registry's key: --api's value and the gateway's "api" label
    operation: str  # OpenTelemetry GenAI operation name, e.g. "chat", "embeddings"
    method: str  # "POST", or "GET" for an API served over an upgraded WebSocket
    path: str  # appended to the base URL, e.g. "/chat/completions"; the gateway and the sim route by it
    headers: tuple[tuple[str, str], ...]  # sent with every request, e.g. Anthropic's version header

    def body(
        self,
        prompt: str,
        max_tokens: int,
        model: str,
        sampling: Sampling,
        stream: bool,
        messages: list[dict[str, str]] | None = None,
    ) -> dict[str, Any]:
        """The request body; ``messages`` (a chat so far) replaces the single user message."""
        ...

    def classify(self, chunk: dict[str, Any], record: RequestRecord) -> int:
        """Flags for one streamed chunk; records usage and finish_reason as they appear. A stream is
        complete once it set finish_reason (its end event) or sent ``[DONE]``: the client and the
        gateway both judge an ended stream by that."""
        ...

    def read_full(self, response: dict[str, Any], record: RequestRecord) -> int:
        """Flags for a non-streamed response; records usage and finish_reason."""
        ...


def common_body(model: str, max_tokens: int, sampling: Sampling, stream: bool) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": max_tokens,
        "temperature": sampling.temperature,
        "top_p": sampling.top_p,
        "stream": stream,
    }
    if stream:
        body["stream_options"] = {"include_usage": True}
    if sampling.ignore_eos:
        body["ignore_eos"] = True
        body["min_tokens"] = max_tokens
    return body


def read_usage(chunk: dict[str, Any], record: RequestRecord) -> None:
    usage = chunk.get("usage")
    if usage:
        prompt = usage.get("prompt_tokens")
        completion = usage.get("completion_tokens")
        # counts only: a string or float here would poison every sum made of records later
        for value in (prompt, completion):
            if value is not None and type(value) is not int:
                raise ValueError("usage token counts are not integers")
        if prompt is not None:
            record.prompt_tokens = prompt
        if completion is not None:
            record.output_tokens_server = completion


def error_text(chunk: dict[str, Any]) -> str | None:
    err = chunk.get("error")
    if err is None:
        if chunk.get("type") == "error":  # OpenAI Responses: the message is on the event itself
            return str(chunk.get("message") or chunk.get("code") or "error")
        response = chunk.get("response")  # OpenAI Responses: response.failed
        return error_text(response) if isinstance(response, dict) else None
    if isinstance(err, dict):
        return str(err.get("message") or err.get("type") or err)
    return str(err)


def first_choice(chunk: dict[str, Any], record: RequestRecord) -> dict[str, Any] | None:
    """The chunk's first choice, after noting its usage and finish reason on the record."""
    if "usage" in chunk:
        read_usage(chunk, record)
    choices = chunk.get("choices")
    if not choices:
        return None
    choice = choices[0]
    finish = choice.get("finish_reason")
    if finish:
        if type(finish) is not str:
            raise ValueError("finish_reason is not a string")
        record.finish_reason = finish
    return cast("dict[str, Any]", choice)
