"""The one registry of API dialects: the client, the gateway's meter and the simulator's routes look
each API up here. Adding an API is one module (a class with the ``Dialect`` attributes) and one line
below; its ``api`` key is also a value of the gateway's bounded ``api`` label."""

from __future__ import annotations

from tokenpace.wire.dialects.anthropic import AnthropicMessages
from tokenpace.wire.dialects.base import Dialect
from tokenpace.wire.dialects.openai_chat import OpenAIChat
from tokenpace.wire.dialects.openai_completions import OpenAICompletions
from tokenpace.wire.dialects.openai_embeddings import OpenAIEmbeddings
from tokenpace.wire.dialects.openai_responses import OpenAIResponses
from tokenpace.wire.dialects.realtime import OpenAIRealtime

DIALECTS: dict[str, type] = {
    cls.api: cls
    for cls in (
        OpenAIChat,
        OpenAICompletions,
        AnthropicMessages,
        OpenAIResponses,
        OpenAIEmbeddings,
        OpenAIRealtime,  # over a WebSocket: sent by client.realtime.RealtimeSender
    )
}
APIS: tuple[str, ...] = tuple(DIALECTS)  # every value the gateway's "api" label can take

# Dialects are stateless: one shared instance each. Longest path first, as "/chat/completions"
# also ends with "/completions".
_INSTANCES: dict[str, Dialect] = {api: cls() for api, cls in DIALECTS.items()}
_BY_PATH = sorted(_INSTANCES.values(), key=lambda d: len(d.path), reverse=True)


def get_dialect(name: str) -> Dialect:
    try:
        dialect: Dialect = DIALECTS[name]()
        return dialect
    except KeyError:
        raise ValueError(f"unknown API {name!r}; choose from {', '.join(DIALECTS)}") from None


def dialect_at(path: str, method: str) -> Dialect | None:
    """The dialect served at a request path under any base path (``/v1/responses``,
    ``/team/v1/messages``), called with its method; None for any other request."""
    path = path.rstrip("/")
    for dialect in _BY_PATH:
        if dialect.method == method and path.endswith(dialect.path):
            return dialect
    return None


def routes(prefix: str) -> dict[str, Dialect]:
    """Every dialect's exact path under ``prefix`` (e.g. "/v1"), as a server routes them."""
    return {prefix + d.path: d for d in _INSTANCES.values()}


def api_root(path: str) -> str:
    """A base path without an API path it may already name (``/v1/chat/completions`` -> ``/v1``):
    where ``/models`` sits beside it."""
    path = path.rstrip("/")
    for dialect in _BY_PATH:
        if path.endswith(dialect.path):
            return path.removesuffix(dialect.path)
    return path
