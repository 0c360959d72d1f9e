"""OpenAI ``/v1/completions`` (legacy text completions)."""

from __future__ import annotations

from typing import Any

from tokenpace.core.record import RequestRecord
from tokenpace.wire.dialects.base import ANSWER, ERROR, Sampling, common_body, first_choice


class OpenAICompletions:
    name = "openai-completions"
    api = "completions"  # its key in the registry and its "api" label value
    operation = "text_completion"  # OpenTelemetry GenAI gen_ai.operation.name
    method = "POST"
    path = "/completions"
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
        # A chat becomes plain text: each message's content on its own line, in order.
        body["prompt"] = "\n".join(m.get("content") or "" for m in messages) if messages else prompt
        return body

    def classify(self, chunk: dict[str, Any], record: RequestRecord) -> int:
        if "error" in chunk:
            return ERROR
        choice = first_choice(chunk, record)
        return ANSWER if choice and choice.get("text") else 0

    def read_full(self, response: dict[str, Any], record: RequestRecord) -> int:
        return self.classify(response, record)
