"""The sim's OpenAI Realtime-style endpoint: ``GET /v1/realtime`` upgraded to a WebSocket, text only.

The client sends JSON events: ``session.update``, ``conversation.item.create`` (a user message joins
the session's conversation) and ``response.create`` (optionally with its own ``input`` and
``"conversation": "none"`` for an out-of-band answer, and ``max_output_tokens``). The answer streams
as ``response.created``, ``response.output_item.added``, ``response.content_part.added``, one
``response.output_text.delta`` per chunk, the ``.done`` events and ``response.done`` with the usage.
One response at a time per session, as the real API: a second ``response.create`` gets an ``error``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import orjson

from tokenpace.sim.endpoints.api import ApiError, GenRequest, StreamDefaults, generation_from
from tokenpace.sim.endpoints.chunks import split_text
from tokenpace.sim.endpoints.tokens import chat_prompt_words
from tokenpace.wire.http1.server import HttpRequest, ServerConnection
from tokenpace.wire.websocket import CLOSE, PING, PONG, TEXT, FrameReader, accept_key, frame

_event_ids = itertools.count(1)


def event(kind: str, fields: dict[str, Any]) -> bytes:
    fields["type"] = kind
    fields["event_id"] = f"event_{next(_event_ids)}"
    return frame(orjson.dumps(fields))


def _messages(items: list[Any]) -> list[dict[str, Any]]:
    """Realtime conversation items -> chat messages (input_text / text / output_text parts)."""
    out = []
    for item in items:
        if not isinstance(item, dict) or item.get("type", "message") != "message":
            continue
        parts = item.get("content") or []
        text = (
            " ".join(p.get("text", "") for p in parts if isinstance(p, dict))
            if isinstance(parts, list)
            else ""
        )
        out.append({"role": str(item.get("role", "user")), "content": text})
    return out


class RealtimeFormat:
    """One response's events, each its own WebSocket frame."""

    __slots__ = ("_id", "_item", "_prompt_tokens")

    def __init__(self, gen: GenRequest, rid: str, created: int) -> None:
        self._id, self._item, self._prompt_tokens = "resp_" + rid, "item_" + rid, len(gen.prompt)

    def _response(
        self, status: str, output: list[dict[str, Any]], usage: dict[str, Any] | None
    ) -> dict[str, Any]:
        details = {"type": "incomplete", "reason": "max_output_tokens"} if status == "incomplete" else None
        r: dict[str, Any] = {"id": self._id, "object": "realtime.response", "status": status}
        r.update(status_details=details, output=output, usage=usage)
        return r

    def _message(self, status: str, text: str | None) -> dict[str, Any]:
        content = [] if text is None else [{"type": "output_text", "text": text}]
        return {
            "id": self._item,
            "object": "realtime.item",
            "type": "message",
            "role": "assistant",
            "status": status,
            "content": content,
        }

    def opening(self) -> bytes:
        at = {"response_id": self._id, "output_index": 0}
        return (
            event("response.created", {"response": self._response("in_progress", [], None)})
            + event("response.output_item.added", {**at, "item": self._message("in_progress", None)})
            + event(
                "response.content_part.added",
                {
                    **at,
                    "item_id": self._item,
                    "content_index": 0,
                    "part": {"type": "output_text", "text": ""},
                },
            )
        )

    def chunk(self, words: str, phase: int, last: bool, done: int) -> bytes:
        fields = {
            "response_id": self._id,
            "item_id": self._item,
            "output_index": 0,
            "content_index": 0,
            "delta": words,
        }
        return event("response.output_text.delta", fields)

    def closing(self, reason: str, prompt_tokens: int, n_out: int) -> bytes:
        text = split_text(n_out, 0)[1]
        at = {"response_id": self._id, "item_id": self._item, "output_index": 0}
        item = self._message("completed" if reason != "length" else "incomplete", text)
        usage = {"total_tokens": prompt_tokens + n_out, "input_tokens": prompt_tokens, "output_tokens": n_out}
        status = "incomplete" if reason == "length" else "completed"
        return (
            event("response.output_text.done", {**at, "content_index": 0, "text": text})
            + event("response.content_part.done", {**at, "content_index": 0, "part": item["content"][0]})
            + event("response.output_item.done", {"response_id": self._id, "output_index": 0, "item": item})
            + event("response.done", {"response": self._response(status, [item], usage)})
        )

    def malformed(self) -> bytes:
        return frame(b'{"type":"response.output_text.delta","delta":')

    def full_response(self, n_out: int, prompt_tokens: int, reason: str) -> bytes:
        return self.closing(reason, prompt_tokens, n_out)


class RealtimeSession:
    """One WebSocket session: reads client events, starts responses, and is their byte sink."""

    def __init__(
        self,
        conn: ServerConnection,
        model: str,
        max_len: int,
        start: Callable[[RealtimeSession, GenRequest], None],
        defaults: StreamDefaults,
    ) -> None:
        self.conn, self.model, self.max_len, self._start = conn, model, max_len, start
        self.defaults = StreamDefaults(0, defaults.tokens_per_chunk)  # text only: no reasoning channel
        self.reader = FrameReader()
        self.items: list[Any] = []  # the conversation: user items sent with conversation.item.create
        self.active = False  # a response is streaming
        self.on_lost: Callable[[], None] | None = None  # the active response's, set by the server
        conn.on_lost = self._lost

    # --- the sink a ResponseStream writes to (the shape of ServerConnection's streaming half) ---
    @property
    def closed(self) -> bool:
        return self.conn.closed

    def start_stream(self, status: int, headers: list[tuple[str, str]]) -> None:
        return None  # the session is already open

    def write_chunk(self, data: bytes) -> None:
        if self.conn.transport is not None and not self.conn.closed:
            self.conn.transport.write(data)

    def end_stream(self, last: bytes = b"") -> None:
        self.write_chunk(last)
        self.active, self.on_lost = False, None

    def respond(self, status: int, body: bytes, headers: list[tuple[str, str]]) -> None:
        self.end_stream(body)

    def close(self) -> None:
        self.conn.close()

    # --- client events ---
    def opened(self) -> None:
        session = {
            "id": "sess_sim",
            "object": "realtime.session",
            "model": self.model,
            "output_modalities": ["text"],
        }
        self.write_chunk(event("session.created", {"session": session}))

    def on_data(self, data: bytes) -> None:
        for opcode, payload in self.reader.feed(data):
            if opcode == TEXT:
                self._on_event(payload)
            elif opcode == PING:
                self.write_chunk(frame(payload, PONG))
            elif opcode == CLOSE:
                self.write_chunk(frame(payload[:2], CLOSE))
                self.conn.close()

    def _error(self, message: str, code: str, event_id: Any = None) -> None:
        err = {"type": "invalid_request_error", "code": code, "message": message, "event_id": event_id}
        self.write_chunk(event("error", {"error": err}))

    def _on_event(self, payload: bytes) -> None:
        try:
            ev = orjson.loads(payload)
        except orjson.JSONDecodeError:
            self._error("event is not valid JSON", "invalid_json")
            return
        kind = ev.get("type") if isinstance(ev, dict) else None
        if kind == "session.update":
            self.write_chunk(
                event("session.updated", {"session": {"model": self.model, "output_modalities": ["text"]}})
            )
        elif kind == "conversation.item.create":
            self.items.append(ev.get("item"))
            self.write_chunk(event("conversation.item.created", {"item": ev.get("item")}))
        elif kind == "response.create":
            self._response_create(ev)
        else:
            self._error(
                f"unsupported event type {kind!r}",
                "unknown_event",
                ev.get("event_id") if isinstance(ev, dict) else None,
            )

    def _response_create(self, ev: dict[str, Any]) -> None:
        if self.active:
            self._error(
                "a response is already in progress",
                "conversation_already_has_active_response",
                ev.get("event_id"),
            )
            return
        spec = ev.get("response") or {}
        items = ([] if spec.get("conversation") == "none" else list(self.items)) + list(
            spec.get("input") or []
        )
        limit = spec.get("max_output_tokens")
        body = {"max_tokens": None if limit in (None, "inf") else limit}
        try:
            prompt = chat_prompt_words(_messages(items))
            gen = generation_from(body, "realtime", self.model, self.max_len, self.defaults, prompt)
        except (ApiError, ValueError) as e:
            self._error(getattr(e, "message", str(e)), "invalid_value", ev.get("event_id"))
            return
        gen.stream = True
        self.active = True
        self._start(self, gen)

    def _lost(self) -> None:
        cb, self.on_lost = self.on_lost, None
        if cb is not None:
            cb()


def accept_session(
    req: HttpRequest,
    model: str,
    max_len: int,
    start: Callable[[RealtimeSession, GenRequest], None],
    defaults: StreamDefaults,
) -> None:
    """Upgrades ``GET /v1/realtime`` to a WebSocket session that says ``session.created`` first."""
    key = req.headers.get("sec-websocket-key")
    if req.headers.get("upgrade", "").lower() != "websocket" or not key:
        raise ApiError(
            "/v1/realtime speaks WebSocket: send an Upgrade request", status=426, code="upgrade_required"
        )
    session = RealtimeSession(req.conn, model, max_len, start, defaults)
    upgrade = [("upgrade", "websocket"), ("connection", "Upgrade"), ("sec-websocket-accept", accept_key(key))]
    req.conn.switch_protocols(upgrade, session.on_data)
    session.opened()
