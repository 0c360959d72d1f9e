"""OpenAI Responses ``/v1/responses``: typed events; reasoning, text and function-call deltas.

TTFT is the first ``response.output_text.delta``, ``response.function_call_arguments.delta`` or
reasoning delta (text or summary) with a non-empty delta; TTFAT the first of the former two.
``response.completed`` / ``response.incomplete`` carry the usage and end the stream (there is no [DONE]).
"""

from __future__ import annotations

from typing import Any

from tokenpace.core.record import RequestRecord
from tokenpace.wire.dialects.base import ANSWER, ERROR, REASONING, Sampling

_DELTA_FLAGS = {
    "response.output_text.delta": ANSWER,
    "response.function_call_arguments.delta": ANSWER,
    "response.reasoning_text.delta": REASONING,
    "response.reasoning_summary_text.delta": REASONING,
}
_ENDS = ("response.completed", "response.incomplete")


class OpenAIResponses:
    name = "openai-responses"
    api = "responses"  # its key in the registry and its "api" label value
    operation = "chat"  # OpenTelemetry GenAI gen_ai.operation.name
    method = "POST"
    path = "/responses"
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
        return {
            "model": model,
            "input": messages if messages is not None else prompt,
            "max_output_tokens": max_tokens,
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            "stream": stream,
            "store": False,
        }

    def classify(self, chunk: dict[str, Any], record: RequestRecord) -> int:
        kind = chunk.get("type")
        flag = _DELTA_FLAGS.get(kind)  # type: ignore[arg-type]
        if flag is not None:
            return flag if chunk.get("delta") else 0
        if kind in _ENDS:
            _read_response(chunk["response"], record)
        elif kind in ("error", "response.failed"):
            return ERROR
        return 0

    def read_full(self, response: dict[str, Any], record: RequestRecord) -> int:
        if response.get("error") or response.get("status") == "failed":
            return ERROR
        _read_response(response, record)
        flags = 0
        for item in response.get("output") or ():
            kind = item.get("type")
            if kind == "reasoning" and (item.get("content") or item.get("summary")):
                flags |= REASONING
            elif kind in ("message", "function_call"):
                flags |= ANSWER
        return flags


def _read_response(response: dict[str, Any], record: RequestRecord) -> None:
    usage = response.get("usage") or {}
    if usage.get("input_tokens") is not None:
        record.prompt_tokens = usage["input_tokens"]
    if usage.get("output_tokens") is not None:
        record.output_tokens_server = usage["output_tokens"]
    details = response.get("incomplete_details") or {}
    record.finish_reason = details.get("reason") or response.get("status") or "completed"
