"""The client half of HTTP/1.1: one keep-alive connection that timestamps bytes as they arrive and
parses responses with httptools, handing each event to the exchange in flight.

Shared by the benchmark client (tokenpace.client) and the gateway's upstream side. The timestamp is
taken first thing in ``data_received``, before any parsing or JSON decoding, so what tokenpace
reports is when the bytes reached the process, not when it got round to them. Body pieces go to the
exchange once per read: the pieces one read holds (an upstream may send every byte as its own HTTP
chunk) are coalesced before they are handed on, no task switch.

Work per loop turn is bounded in work units (body pieces and response heads), not only in bytes,
and the bound is the loop's, shared by all its connections (turn_budget.py): a read is fed to the
parser in slices that cannot hold more units than this connection (``PIECES_PER_TURN``) and the
loop's turn (``UNITS_PER_TURN``) have left; the rest of the read waits, reading paused, in the loop's
round-robin queue, so twenty peers sending one byte per chunk together get one turn's budget, not
twenty, and a healthy stream's next read is parsed at most one turn later.
"""

from __future__ import annotations

import asyncio
from time import perf_counter_ns
from typing import Protocol

import httptools

from tokenpace.wire.http1.turn_budget import PieceRate, feed_bytes, loop_clock, turn_budget


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
# Units parsed per connection per loop turn (a healthy read holds one to a few; a read of one-byte
# chunks ~10,000), within the loop's shared UNITS_PER_TURN: past either the rest waits a turn.
PIECES_PER_TURN = 128
# Units per connection per second, on the loop's clock (a real stream's tokens are hundreds to a few
# thousand a second): past it the connection waits, reading paused, until the time passed refills
# some, so a peer sending one byte per chunk is read at this rate however many turns it gets, and a
# burst past it is read at this rate and then at full speed again.
PIECES_PER_SECOND = 10_000


class ResponseConnection(asyncio.Protocol):
    """One HTTP/1.1 connection, one exchange at a time (``start``); reusable when the last response
    ended and both sides allow keep-alive."""

    __slots__ = (
        "backlog",
        "body",
        "body_left",
        "chunked",
        "closed",
        "draining",
        "exchange",
        "framed",
        "head_bytes",
        "head_only",
        "held",
        "idle_since_ns",
        "in_body",
        "interim",
        "keep_alive",
        "lost_exc",
        "now",
        "parser",
        "pieces",
        "rate",
        "transport",
        "turn",
        "waiting",
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
        self.body_left = 0  # of a body with a length: what is still to come (feeds up to its end)
        # Body pieces parsed from the current slice, not yet handed on (at most one read's bytes).
        self.body: list[bytes] = []
        self.pieces = 0  # body pieces parsed this loop turn
        # The unparsed rest of a read past this turn's budget (reading paused, so at most one read).
        self.backlog: memoryview | None = None
        self.held = False  # the consumer paused reading (its client reads slower)
        self.waiting = False  # past a budget: a later turn (or the rate's refill) resumes the feed
        self.rate = PieceRate(PIECES_PER_SECOND, loop_clock())
        # Lost with a backlog: the rest of the last read is parsed a share a turn, then the loss told.
        self.draining = False
        self.lost_exc: Exception | None = None
        self.turn = turn_budget()  # the loop's work per turn, shared by all its connections

    # --- asyncio.Protocol ---
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.turn = turn_budget()
        self.rate = PieceRate(PIECES_PER_SECOND, loop_clock())

    def data_received(self, data: bytes) -> None:
        self.now = perf_counter_ns()
        if self.backlog is not None:  # a read that was in flight as reading paused
            self.backlog = memoryview(bytes(self.backlog) + data)
            return
        self._parse(data, PIECES_PER_TURN)

    def _parse(self, data: bytes | memoryview, quantum: int) -> None:
        """Parses ``data`` up to ``quantum`` units and what the loop's turn has left; the rest is the
        backlog, reading paused, queued for a later turn."""
        turn = self.turn
        self.pieces = 0
        while data and (self.draining or not self.closed):
            grant = min(quantum - self.pieces, turn.left)
            if grant <= 0:
                break
            before = self.pieces
            size = feed_bytes(grant)
            if self.in_body and not self.chunked:  # one piece per feed however long: up to its end
                size = max(size, self.body_left if self.framed else len(data))
            if len(data) <= size:  # a healthy read: one feed, no slicing
                self._feed(data)
                data = b""
            else:
                view = data if isinstance(data, memoryview) else memoryview(data)
                self._feed(view[:size])
                data = view[size:]
            turn.spend(self.pieces - before)
        self._flush()
        if self.draining:  # the connection is gone: the rest of its last read, a share a turn
            if data and self.exchange is not None:
                self.backlog = data if isinstance(data, memoryview) else memoryview(data)
                self.waiting = True
                turn.wait(self)
            else:
                self._lost()
            return
        if self.closed or self.transport is None:
            return
        delay_s = self.rate.spend(self.pieces)
        if delay_s:  # past the connection's rate: wait until the loop's clock has refilled some
            self.backlog = (data if isinstance(data, memoryview) else memoryview(data)) if data else None
            self._wait(delay_s)
        elif data:
            self.backlog = data if isinstance(data, memoryview) else memoryview(data)
            self._wait(None)

    def _wait(self, delay_s: float | None) -> None:
        """Past a budget: reading pauses; the rest waits for the loop's next round (``delay_s``
        None) or ``delay_s`` seconds (the rate's refill)."""
        if self.waiting or self.transport is None:
            return
        self.transport.pause_reading()
        self.waiting = True
        if delay_s is None:
            self.turn.wait(self)
        else:
            asyncio.get_running_loop().call_later(delay_s, self.take_turn, PIECES_PER_TURN)

    def take_turn(self, quantum: int) -> None:
        """Served by the loop's budget (or the rate's refill): up to ``quantum`` units of the backlog."""
        self.waiting = False
        if self.draining:  # no reading left to hold back: the consumer gets the rest as it comes
            view, self.backlog = self.backlog, None
            self._parse(view if view is not None else b"", min(quantum, PIECES_PER_TURN))
            return
        if self.closed or self.held:  # closed: nothing to do; held: resume_reading queues again
            return
        view, self.backlog = self.backlog, None
        if view is not None:
            self._parse(view, min(quantum, PIECES_PER_TURN))
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
            self.waiting = True
            self.turn.wait(self)
        else:
            self.transport.resume_reading()

    def _feed(self, data: bytes | memoryview) -> None:
        ex = self.exchange  # kept: a callback may have cleared self.exchange before it raised
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._broken(ex, "upstream switched protocols (101) on a request that asked for none")
            return
        except httptools.HttpParserError as exc:
            self._broken(ex, parse_error_text(exc))
            return
        if not self.in_body and ex is not None:  # an endless head would grow without end
            self.head_bytes += len(data)
            if self.head_bytes > MAX_HEAD_BYTES:
                self._broken(ex, f"response head over {MAX_HEAD_BYTES // 1024} KiB")

    def _broken(self, ex: ResponseHandler | None, reason: str) -> None:
        self.keep_alive = False
        self.exchange = None
        self.body.clear()
        self.backlog = None
        self.draining = False
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
        self.lost_exc = exc
        closed, self.closed = self.closed, True
        view = self.backlog
        # Bytes that came before the close (not when we aborted it: the exchange is over then).
        if view is not None and self.exchange is not None and not closed:
            if self.turn.loop is not None:  # parsed a share a turn, like any backlog, then lost
                self.draining = True
                if not self.waiting:
                    self.waiting = True
                    self.turn.wait(self)
                return
            self.backlog = None
            self.pieces = 0
            self._feed(view)
            self._flush()
        self._lost()

    def _lost(self) -> None:
        self.draining = False
        self.backlog = None
        ex = self.exchange
        if ex is not None:
            self.exchange = None
            body_ended = self.lost_exc is None and self.in_body and not self.framed
            ex.response_lost(self.lost_exc, perf_counter_ns(), body_ended)

    # --- httptools callbacks ---
    def on_header(self, name: bytes, value: bytes) -> None:
        ex = self.exchange
        if ex is not None:
            low = name.lower()
            if low == b"content-length":
                self.body_left = int(value) if value.isdigit() and len(value) < 19 else 0
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
        self.pieces += 1  # a head is a unit of work too (a peer of many short responses)
        ex.response_head(status, self.now)
        if self.head_only:
            self.keep_alive = False  # the parser cannot know no body follows; do not reuse
            self.on_message_complete()

    def on_body(self, body: bytes) -> None:
        self.pieces += 1
        self.body_left -= len(body)
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
        self.head_bytes = self.body_left = 0
        self.body.clear()
        self.transport.write(payload)  # type: ignore[union-attr]

    def abort(self) -> None:
        """Drops the connection now: the exchange is over either way, no graceful close."""
        self.closed = True
        if self.draining:  # already gone: what its backlog held is dropped, the exchange told now
            self._lost()
        elif self.transport is not None:
            self.transport.abort()
