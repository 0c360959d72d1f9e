"""Records of a proxied Realtime WebSocket session: one per response, from a copy of the events.

A record starts when the client's ``response.create`` is relayed, is bound to the upstream's response
by ``response.created``, is timed by the dialect (first text delta = first token) and ends at
``response.done``. Each relayed text message is parsed at most once; the client's are parsed only
when they can be a ``response.create``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

import orjson

from tokenpace.core.record import RequestRecord
from tokenpace.gateway.metering.outcome import Outcome
from tokenpace.wire.dialects.base import ANSWER, ERROR, Dialect, error_text

MAX_OPEN_RESPONSES = 16  # measured at once per session; more response.create are relayed unmeasured
_ENDED = {
    "completed": (Outcome.OK, None),
    "incomplete": (Outcome.OK, None),  # stopped at its own max_output_tokens: a complete answer
    "cancelled": (Outcome.CLIENT_DISCONNECT, "the client cancelled the response"),
}

NewRecord = Callable[[int], RequestRecord]
Finish = Callable[[RequestRecord, Outcome, "str | None"], None]


class RealtimeMeter:
    __slots__ = ("dialect", "finish", "new_record", "open", "started", "waiting")

    def __init__(self, dialect: Dialect, new_record: NewRecord, finish: Finish, started: int) -> None:
        self.dialect = dialect
        self.started = started  # when the client asked for the session
        self.new_record = new_record
        self.finish = finish
        # response.create relayed, no response.created yet (with the client's event_id, if any)
        self.waiting: deque[tuple[Any, RequestRecord]] = deque()
        self.open: dict[str, RequestRecord] = {}  # the upstream's response id -> its record

    def session_failed(self, outcome: Outcome, error: str, status: int | None = None) -> None:
        """No session: one record says why (a refused upgrade, an unreachable upstream)."""
        record = self.new_record(self.started)
        record.http_status = status
        self.finish(record, outcome, error[:200])

    def from_client(self, text: str, now: int) -> None:
        if '"response.create"' not in text:  # most client events (audio, session) skip the parse
            return
        if len(self.waiting) + len(self.open) >= MAX_OPEN_RESPONSES:
            return
        try:
            event = orjson.loads(text)
        except orjson.JSONDecodeError:
            return  # the upstream will say so; the relay forwards it unchanged either way
        if type(event) is dict and event.get("type") == "response.create":
            record = self.new_record(now)
            record.request_ns = now
            self.waiting.append((event.get("event_id"), record))

    def from_upstream(self, text: str, now: int) -> None:
        if not self.waiting and not self.open:
            return  # nothing to time: not worth a parse
        try:
            event = orjson.loads(text)
        except orjson.JSONDecodeError:
            self._fail_all(Outcome.PROTOCOL_ERROR, "malformed JSON event from the upstream")
            return
        if type(event) is not dict:
            return
        kind = event.get("type")
        if kind == "response.created":
            self._bind(event, now)
            return
        if kind == "error":
            self._refused(event)
            return
        response = event.get("response")
        rid = event.get("response_id") or (response.get("id") if type(response) is dict else None)
        if type(rid) is not str or rid not in self.open:
            return
        record = self.open[rid]
        try:
            flags = self.dialect.classify(event, record)
        except (AttributeError, TypeError, KeyError, ValueError) as exc:
            del self.open[rid]
            self.finish(record, Outcome.PROTOCOL_ERROR, f"unexpected event shape ({type(exc).__name__})")
            return
        if flags & ~ERROR:
            record.note_token_chunk(now, bool(flags & ANSWER))
        if kind == "response.done":
            del self.open[rid]
            status = response.get("status") if type(response) is dict else None
            ended = _ENDED.get(status) if type(status) is str else None
            outcome, error = ended or (Outcome.UPSTREAM_ABORT_MID_STREAM, f"response {status}")
            self.finish(record, outcome, error)

    def _bind(self, event: dict[str, Any], now: int) -> None:
        response = event.get("response")
        rid = response.get("id") if type(response) is dict else None
        if self.waiting and type(rid) is str:
            _, record = self.waiting.popleft()
            record.headers_ns, record.http_status = now, 101
            self.open[rid] = record

    def _refused(self, event: dict[str, Any]) -> None:
        """An error event: it answers the client event named by its event_id, else the oldest waiting."""
        err = event.get("error")
        about = err.get("event_id") if type(err) is dict else None
        for i, (event_id, record) in enumerate(self.waiting):
            if about is None or event_id == about:
                del self.waiting[i]
                self.finish(record, Outcome.HTTP_ERROR, f"error event: {error_text(event)}"[:200])
                return

    def _fail_all(self, outcome: Outcome, error: str) -> None:
        records = [r for _, r in self.waiting] + list(self.open.values())
        self.waiting.clear()
        self.open.clear()
        for record in records:
            self.finish(record, outcome, error)

    def close(self, outcome: Outcome, error: str) -> None:
        """The session ended: every response still open ends with it."""
        self._fail_all(outcome, error)
