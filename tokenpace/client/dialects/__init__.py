"""API dialects: one module each; adding one touches neither the scheduler nor the metrics."""

from __future__ import annotations

from typing import Any

from tokenpace.client.dialects.anthropic import AnthropicMessages
from tokenpace.client.dialects.base import Dialect
from tokenpace.client.dialects.openai_chat import OpenAIChat
from tokenpace.client.dialects.openai_completions import OpenAICompletions
from tokenpace.client.dialects.openai_embeddings import OpenAIEmbeddings
from tokenpace.client.dialects.openai_responses import OpenAIResponses
from tokenpace.client.dialects.realtime import OpenAIRealtime

__all__ = [
    "DIALECTS",
    "AnthropicMessages",
    "Dialect",
    "OpenAIChat",
    "OpenAICompletions",
    "OpenAIEmbeddings",
    "OpenAIRealtime",
    "OpenAIResponses",
    "get_dialect",
]

DIALECTS: dict[str, type[Any]] = {
    "chat": OpenAIChat,
    "completions": OpenAICompletions,
    "anthropic": AnthropicMessages,
    "responses": OpenAIResponses,
    "embeddings": OpenAIEmbeddings,
    "realtime": OpenAIRealtime,  # over a WebSocket: sent by client.realtime.RealtimeSender
}


def get_dialect(name: str) -> Dialect:
    try:
        dialect: Dialect = DIALECTS[name]()
    except KeyError:
        raise ValueError(f"unknown API {name!r}; choose from {', '.join(DIALECTS)}") from None
    return dialect
