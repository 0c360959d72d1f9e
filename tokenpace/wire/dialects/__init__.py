"""API dialects: one module each; adding one touches neither the scheduler nor the metrics."""

from __future__ import annotations

from tokenpace.wire.dialects.anthropic import AnthropicMessages
from tokenpace.wire.dialects.base import Dialect
from tokenpace.wire.dialects.openai_chat import OpenAIChat
from tokenpace.wire.dialects.openai_completions import OpenAICompletions
from tokenpace.wire.dialects.openai_embeddings import OpenAIEmbeddings
from tokenpace.wire.dialects.openai_responses import OpenAIResponses
from tokenpace.wire.dialects.realtime import OpenAIRealtime

DIALECTS: dict[str, type] = {
    "chat": OpenAIChat,
    "completions": OpenAICompletions,
    "anthropic": AnthropicMessages,
    "responses": OpenAIResponses,
    "embeddings": OpenAIEmbeddings,
    "realtime": OpenAIRealtime,  # over a WebSocket: sent by client.realtime.RealtimeSender
}


def get_dialect(name: str) -> Dialect:
    try:
        return DIALECTS[name]()
    except KeyError:
        raise ValueError(f"unknown API {name!r}; choose from {', '.join(DIALECTS)}") from None
