"""Timestamps the tokens of a proxied response from a copy of its bytes; never changes what is forwarded.

Reuses the offline client's pieces (SSE parser, the registry's dialects), so a gateway record means
exactly what a bench record means, for every API. Each event is parsed once, and read once by its
dialect.
"""

from __future__ import annotations

import orjson

from tokenpace.core.record import RequestRecord
from tokenpace.gateway.metering.budget import Budget
from tokenpace.wire.dialects.base import ANSWER, ERROR, Dialect, error_text
from tokenpace.wire.inflate import MAX_STREAM_BYTES, TURN_BYTES, InflateError, Inflater, supported
from tokenpace.wire.sse import DONE, SseParser, parse_data

_BODY_LIMIT = 8 * 1024 * 1024  # non-streamed bodies beyond this are forwarded but not parsed


class Meter:
    """Feed it every body chunk with its arrival time; it fills the record's token fields."""

    __slots__ = (
        "_body",
        "_inflate",
        "budget",
        "dialect",
        "done",
        "error",
        "overflow",
        "protocol_error",
        "record",
        "sse",
    )

    def __init__(self, record: RequestRecord, dialect: Dialect, content_type: str, encoding: str) -> None:
        self.record = record
        self.dialect = dialect
        self.sse = SseParser() if content_type.startswith("text/event-stream") else None
        self._body = bytearray()
        self.budget: Budget | None = None  # bytes held by all meters together (budget.py)
        self.done = False  # [DONE] seen
        self.error: str | None = None  # the upstream reported an error inside the stream
        self.protocol_error: str | None = None  # the first thing the meter could not read
        self.overflow: str | None = None  # an event past the SSE bound: the stream must be cut
        # Compressed bodies are forwarded as they are; a copy inflated a bounded step at a time is
        # measured, up to the cap of a plain body (tokenpace.wire.inflate).
        self._inflate: Inflater | None = None
        encoding = encoding.strip().lower()
        if supported(encoding):
            self._inflate = Inflater(encoding, MAX_STREAM_BYTES if self.sse is not None else _BODY_LIMIT)
        elif encoding not in ("", "identity"):
            self.sse = None
            self.protocol_error = f"content-encoding {encoding} not measured"

    def _feed_compressed(self, data: bytes, now: int) -> None:
        inflater = self._inflate
        if inflater is None:
            return
        try:
            for piece in inflater.feed(data, TURN_BYTES):
                self.feed(piece, now, inflated=True)
        except InflateError as exc:
            self._inflate, self.sse = None, None
            self.protocol_error = self.protocol_error or str(exc)

    @property
    def inflating(self) -> bool:
        """Compressed input is left past this turn's inflation budget: feed ``b""`` next turn."""
        return self._inflate is not None and self._inflate.pending

    def feed(self, data: bytes, now: int, inflated: bool = False) -> None:
        if self._inflate is not None and not inflated:
            self._feed_compressed(data, now)
            return
        sse = self.sse
        if sse is None:
            if self.protocol_error is None and len(self._body) < _BODY_LIMIT:
                if self.budget is not None and not self.budget.take(len(data)):
                    self.release()
                    self.protocol_error = "body past the gateway's memory budget: not measured"
                    return
                self._body += data
            return
        payloads = sse.feed(data)  # framing goes on after an error: the event bound still holds
        if payloads and self.error is None:
            rec = self.record
            for payload in payloads:
                if self.protocol_error is not None:
                    if payload == DONE:
                        self.done = True  # the client did get a complete stream; the blame stays
                    continue
                try:
                    chunk = parse_data(payload)
                except ValueError as exc:
                    # the reason without the payload: it may hold completion text, never kept
                    self.protocol_error = str(exc).split(":", 1)[0]
                    continue
                if chunk is None:
                    self.done = True
                    continue
                try:
                    flags = self.dialect.classify(chunk, rec)
                except Exception as exc:  # any shape a dialect did not expect: {"choices":5}, ...
                    self.protocol_error = f"unexpected chunk shape ({type(exc).__name__})"
                    continue
                if not flags:
                    continue
                if flags & ERROR:
                    self.error = f"error event in stream: {error_text(chunk)}"[:200]
                    break
                rec.note_token_chunk(now, bool(flags & ANSWER))
        if sse.error is not None and self.overflow is None:
            self.overflow = sse.error
            self.protocol_error = self.protocol_error or sse.error

    def release(self) -> None:
        """The request is over: the body kept to measure it goes back to the budget."""
        if self.budget is not None:
            self.budget.give_back(len(self._body))
        self._body = bytearray()

    @property
    def saw_token(self) -> bool:
        return self.record.first_token_ns is not None

    def finish_stream_ok(self) -> bool:
        """At a clean end of body: did the stream end as a complete answer?"""
        if self.sse is None:
            return True
        return self.done or self.record.finish_reason is not None

    def finish_full(self, now: int) -> None:
        """Non-streamed body complete: the whole answer arrived at once, so TTFT equals E2E."""
        if self.sse is not None or self.protocol_error is not None or not self._body:
            return
        try:
            response = orjson.loads(self._body)
        except orjson.JSONDecodeError:
            self.protocol_error = "response body is not JSON"
            return
        if type(response) is not dict:
            self.protocol_error = "response body is not a JSON object"
            return
        rec = self.record
        try:
            flags = self.dialect.read_full(response, rec)
        except Exception as exc:  # an odd shape: the body was forwarded whole; say we could not read it
            self.protocol_error = f"unexpected response shape ({type(exc).__name__})"
            return
        if flags & ERROR:
            self.error = f"server error: {error_text(response)}"[:200]
        elif flags:
            rec.first_token_ns = now
            if flags & ANSWER:
                rec.first_answer_ns = now
            rec.token_ns.append(now)
