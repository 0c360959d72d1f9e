"""The client half of HTTP/1.1: one keep-alive connection that timestamps bytes as they arrive and
parses responses with httptools, handing each event to the exchange in flight.

Shared by the benchmark client (tokenpace.client) and the gateway's upstream side. The timestamp is
taken first thing in ``data_received``, before any parsing or JSON decoding, so what tokenpace
reports is when the bytes reached the process, not when it got round to them. Body pieces go to the
exchange once per read: the pieces one read holds (an upstream may send every byte as its own HTTP
chunk) are coalesced before they are handed on, no task switch.

Work per loop turn is bounded in work, not only in bytes: a read is fed to the parser
``FEED_BYTES`` at a time, and once one turn has parsed ``PIECES_PER_TURN`` body pieces the rest of
the read waits for the next turn (reading paused meanwhile), so a peer that sends one byte per chunk
yields to the others instead of running ~10,000 callbacks in one turn. Beyond a small free share,
the pieces are drawn from a pool all the loop's connections share (``shared_budget.py``), so N such
peers together do not get N times the work; a connection past its free share is fed in small slices.
"""

from __future__ import annotations

import asyncio
from time import perf_counter_ns
from typing import Protocol

import httptools

from tokenpace.wire.http1.shared_budget import (
    FREE_PIECES_PER_SECOND,
    FREE_PIECES_PER_TURN,
    SharedPieces,
    for_loop,
)


class ResponseHandler(Protocol):
    """What an exchange hears from its connection; ``now`` is the arrival time (perf_counter_ns) of
    the bytes that carried the event."""

    def response_header(self, name: bytes, low_name: bytes, value: bytes) -> None: ...

    def response_interim(self) -> None:
        """A 1xx response ended; the real one follows (headers seen so far were the 1xx's)."""

    def response_head(self, status: int, now: int) -> None: ...

    def response_body(self, data: bytes, now: int) -> None: ...

    def response_end(self, now: int) -> None: ...

    def response_lost(self, exc: Exception | None, now: int, body_ended: bool) -> None:
        """The connection ended first. ``body_ended``: the body had no length or chunking, so
        its end is the (clean) close, and it is complete."""

    def response_malformed(self, reason: str, now: int) -> None: ...


def parse_error_text(exc: httptools.HttpParserError) -> str:
    """An exception raised inside a callback reaches us wrapped in a parser error: name the cause."""
    cause = exc.__cause__ or exc.__context__
    return f"unexpected response: {cause}" if cause else f"malformed HTTP response: {exc}"


MAX_HEAD_BYTES = 64 * 1024  # status line and headers of one response (real ones are < 4 KiB)
FEED_BYTES = 4 * 1024  # bytes of a read handed to the parser at once
# Body pieces parsed per connection per loop turn (a healthy read holds one to a few; a read of
# one-byte chunks ~10,000): past it the rest of the read waits a turn.
PIECES_PER_TURN = 128
# Body pieces per connection per second (a real stream's tokens are hundreds to a few thousand a
# second): past it the connection waits for the next second, reading paused, so a peer sending one
# byte per chunk cannot take the CPU from the healthy ones however many turns it gets.
PIECES_PER_SECOND = 10_000
_SECOND_NS = 1_000_000_000
# A connection whose last slice held pieces of under TINY_PIECE_BYTES on average (one-byte or 7-byte
# HTTP chunks; a real SSE event is 100+ bytes, a sized body one piece a slice) is fed in slices this
# small (at most ~40 one-byte chunks each), so its turn ends close to where its budget ran out.
SMALL_FEED_BYTES = 256
TINY_PIECE_BYTES = 64


class ResponseConnection(asyncio.Protocol):
    """One HTTP/1.1 connection, one exchange at a time (``start``); reusable when the last response
    ended and both sides allow keep-alive."""

    __slots__ = (
        "backlog",
        "body",
        "chunked",
        "closed",
        "counted",
        "exchange",
        "feed_bytes",
        "framed",
        "head_bytes",
        "head_only",
        "held",
        "idle_since_ns",
        "in_body",
        "interim",
        "keep_alive",
        "now",
        "parser",
        "pieces",
        "shared",
        "transport",
        "waiting",
        "window_ns",
        "window_pieces",
    )

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.exchange: ResponseHandler | None = None
        self.now = 0  # arrival time of the bytes being parsed
        self.keep_alive = True
        self.closed = False
        self.idle_since_ns = perf_counter_ns()  # when the last response ended (for pools)
        self.head_only = False  # HEAD: no body follows the headers
        self.framed = False  # the response said how its body ends (length or chunked)
        self.chunked = False  # ... and it was chunked (a stream: some servers close after one)
        self.in_body = False  # the final response's headers have arrived
        self.interim = False  # parsing a 1xx response
        self.head_bytes = 0  # bytes of the current response before its head was complete
        # Body pieces parsed from the current slice, not yet handed on (at most one read's bytes).
        self.body: list[bytes] = []
        self.pieces = 0  # body pieces parsed this loop turn
        self.counted = 0  # ... of which already counted against the budgets
        self.feed_bytes = FEED_BYTES  # the slice: SMALL_FEED_BYTES while its pieces are tiny
        self.shared: SharedPieces = for_loop()  # the pool of the loop it was made in
        # The unparsed rest of a read past this turn's budget (reading paused, so at most one read).
        self.backlog: memoryview | None = None
        self.held = False  # the consumer paused reading (its client reads slower)
        self.waiting = False  # past a budget: a later turn (or second) resumes the feed
        self.window_ns = 0  # when the current second of the per-second budget began
        self.window_pieces = 0  # body pieces parsed in it

    # --- asyncio.Protocol ---
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.now = perf_counter_ns()
        if self.backlog is not None:  # a read that was in flight as reading paused
            self.backlog = memoryview(bytes(self.backlog) + data)
            return
        self.pieces = self.counted = 0
        if len(data) <= self.feed_bytes:
            self._feed(data)
            self._flush()
            if self._spent():
                self._yield()
            return
        self._feed_view(memoryview(data))

    def _feed_view(self, view: memoryview) -> None:
        """Feeds ``view`` a slice at a time until this turn's piece budget is spent."""
        while view:
            n = self.feed_bytes
            self._feed(view[:n])
            view = view[n:]
            if view and not self.closed and self._spent():
                self._flush()
                self.backlog = view
                self._yield()
                return
        self._flush()
        if self._spent():
            self._yield()

    def _spent(self) -> bool:
        """Counts the pieces parsed since the last count; True when past this connection's turn or
        second budget, or past its free share with the loop's shared pool spent. Time is the
        arrival of the read being parsed (no clock read of its own)."""
        t, pieces = self.now, self.pieces
        fresh = pieces - self.counted
        self.counted = pieces
        if t - self.window_ns >= _SECOND_NS:
            self.window_ns, self.window_pieces = t, 0
        self.window_pieces += fresh
        beyond_turn = min(fresh, pieces - FREE_PIECES_PER_TURN)
        if beyond_turn <= 0:
            return self.window_pieces > PIECES_PER_SECOND
        beyond_second = max(0, min(fresh, self.window_pieces - FREE_PIECES_PER_SECOND))
        shared = self.shared
        shared.draw(beyond_turn, beyond_second, t)
        return (
            pieces > PIECES_PER_TURN
            or self.window_pieces > PIECES_PER_SECOND
            or shared.turn_left < 0
            or (beyond_second > 0 and shared.second_left < 0)
        )

    def _yield(self) -> None:
        """Past a budget: reading pauses; the rest waits for a later turn, or past the second's
        budget for the next second."""
        if self.transport is None or self.closed or self.waiting:
            return
        self.transport.pause_reading()
        self.waiting = True
        loop = asyncio.get_running_loop()
        if self.window_pieces > PIECES_PER_SECOND:
            loop.call_later((self.window_ns + _SECOND_NS - self.now) / 1e9, self._resume_feed)
        elif self.shared.second_left < 0 and self.window_pieces > FREE_PIECES_PER_SECOND:
            loop.call_later(self.shared.next_second_s(self.now), self._resume_feed)
        else:
            loop.call_soon(self._resume_feed)

    def _resume_feed(self) -> None:
        self.waiting = False
        if self.closed or self.held:  # closed: nothing to do; held: resume_reading calls again
            return
        view, self.backlog = self.backlog, None
        self.pieces = self.counted = 0
        if view is not None:
            self._feed_view(view)
        if self.backlog is None and not self.waiting and not self.closed and self.transport is not None:
            self.transport.resume_reading()

    def pause_reading(self) -> None:
        """The consumer cannot take more now (flow control towards a slower client)."""
        self.held = True
        if self.transport is not None and not self.closed:
            self.transport.pause_reading()

    def resume_reading(self) -> None:
        self.held = False
        if self.transport is None or self.closed or self.waiting:  # waiting: its own resume follows
            return
        if self.backlog is not None:
            asyncio.get_running_loop().call_soon(self._resume_feed)
        else:
            self.transport.resume_reading()

    def _feed(self, data: bytes | memoryview) -> None:
        ex = self.exchange  # kept: a callback may have cleared self.exchange before it raised
        before = self.pieces
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._broken(ex, "upstream switched protocols (101) on a request that asked for none")
            return
        except httptools.HttpParserError as exc:
            self._broken(ex, parse_error_text(exc))
            return
        tiny = (self.pieces - before) * TINY_PIECE_BYTES > len(data)
        self.feed_bytes = SMALL_FEED_BYTES if tiny else FEED_BYTES
        if not self.in_body and ex is not None:  # an endless head would grow without end
            self.head_bytes += len(data)
            if self.head_bytes > MAX_HEAD_BYTES:
                self._broken(ex, f"response head over {MAX_HEAD_BYTES // 1024} KiB")

    def _broken(self, ex: ResponseHandler | None, reason: str) -> None:
        self.keep_alive = False
        self.exchange = None
        self.body.clear()
        self.backlog = None
        if ex is not None:
            ex.response_malformed(reason, self.now)
        self.abort()

    def _flush(self) -> None:
        """Hands the body pieces parsed so far to the exchange, as one piece."""
        body = self.body
        if not body:
            return
        data = body[0] if len(body) == 1 else b"".join(body)
        body.clear()
        ex = self.exchange
        if ex is not None:
            ex.response_body(data, self.now)

    def connection_lost(self, exc: Exception | None) -> None:
        view, self.backlog = self.backlog, None
        if view is not None and self.exchange is not None:  # bytes that came before the close
            self.pieces = self.counted = 0
            self._feed(view)
            self._flush()
        self.closed = True
        ex = self.exchange
        if ex is not None:
            self.exchange = None
            body_ended = exc is None and self.in_body and not self.framed
            ex.response_lost(exc, perf_counter_ns(), body_ended)

    # --- httptools callbacks ---
    def on_header(self, name: bytes, value: bytes) -> None:
        ex = self.exchange
        if ex is not None:
            low = name.lower()
            if low == b"content-length":
                self.framed = True  # else the body ends when the server closes the connection
            elif low == b"transfer-encoding" and b"chunked" in value.lower():
                self.framed = self.chunked = True
            ex.response_header(name, low, value)

    def on_headers_complete(self) -> None:
        parser = self.parser
        self.keep_alive = parser.should_keep_alive()
        ex = self.exchange
        if ex is None:
            return
        status = parser.get_status_code()
        if status < 200:  # 1xx: interim, the real response follows on its own head
            self.interim = True
            self.framed = self.chunked = False
            ex.response_interim()
            return
        self.in_body = True
        ex.response_head(status, self.now)
        if self.head_only:
            self.keep_alive = False  # the parser cannot know no body follows; do not reuse
            self.on_message_complete()

    def on_body(self, body: bytes) -> None:
        self.pieces += 1
        if self.exchange is not None:
            self.body.append(body)

    def on_message_complete(self) -> None:
        if self.interim:
            self.interim = False  # keep the exchange: its response is still to come
            return
        self._flush()
        ex = self.exchange
        self.exchange = None
        self.in_body = False
        self.idle_since_ns = self.now
        if ex is not None:
            ex.response_end(self.now)

    # --- ours ---
    @property
    def reusable(self) -> bool:
        return not self.closed and self.keep_alive and self.exchange is None

    def start(self, exchange: ResponseHandler, payload: bytes, head_only: bool = False) -> None:
        """Sends the request ``payload``; the response's events go to ``exchange``."""
        self.exchange = exchange
        self.head_only = head_only
        self.framed = self.chunked = self.in_body = self.interim = False
        self.head_bytes = 0
        self.body.clear()
        self.transport.write(payload)  # type: ignore[union-attr]

    def abort(self) -> None:
        """Drops the connection now: the exchange is over either way, no graceful close."""
        self.closed = True
        if self.transport is not None:
            self.transport.abort()
