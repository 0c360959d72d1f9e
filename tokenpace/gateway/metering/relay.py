"""The per-chunk hot path: meter a body piece and write it straight to the client's transport.

Runs inside the upstream connection's ``data_received``: no task switch, no await, one transport
write per piece. When the client reads slower than the upstream writes, upstream reading pauses.

Metering is sliced: a read larger than ``METER_SLICE`` is forwarded at once but metered a slice per
loop turn, upstream reading paused meanwhile, so no stream holds the loop for more than about a
millisecond however tiny and many its events (one 256 KiB read of tiny events is ~4,600 of them).
Timestamps are those of the read's arrival, as they would be unsliced. A compressed body is
inflated for metering at most ``tokenpace.wire.inflate.TURN_BYTES`` per turn the same way (a gzip
bomb is worked through a slice per turn, upstream reading paused, never in one call). The slices of
all streams share one queue per loop (turns.py): a loop turn meters at most about 2 ms in all,
however many streams have a backlog.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Awaitable, Callable

from tokenpace.core.record import RequestRecord
from tokenpace.gateway.metering.meter import Meter
from tokenpace.gateway.metering.outcome import InternalFault
from tokenpace.gateway.metering.stream_stats import ItlCounts
from tokenpace.gateway.metering.turns import turns_of
from tokenpace.gateway.metering.watchdog import Watchdog
from tokenpace.wire.connection import HttpConnection
from tokenpace.wire.exchange import BodyReader, Exchange

HIGH_WATER = 256 * 1024  # client-side buffered bytes before upstream reading pauses
LOW_WATER = 64 * 1024
METER_SLICE = 8 * 1024  # bytes metered per loop turn: ~150 tiny events, about a millisecond


class Relay(BodyReader):
    __slots__ = (
        "backlog",
        "client",
        "client_gone",
        "conn",
        "dog",
        "drain",
        "ended_ns",
        "fault",
        "framed",
        "itl",
        "loop",
        "meter",
        "paused",
        "queued",
        "record",
        "stopped",
        "tokens",
        "wake",
    )

    def __init__(
        self,
        client: asyncio.Transport,
        conn: HttpConnection,
        meter: Meter | None,
        record: RequestRecord | None,
        dog: Watchdog,
        framed: bool,
        itl: ItlCounts | None = None,
        drain: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.drain = drain  # waits until the client transport's writing resumes (aiohttp's writer)
        self.client = client
        self.conn = conn
        self.meter = meter
        self.record = record
        self.dog = dog
        self.framed = framed  # chunked transfer coding towards the client
        self.itl = itl  # inter-token gaps, bucketed as the tokens arrive
        self.tokens = 0
        self.paused = False  # upstream reading paused: the client reads slower
        self.client_gone = False
        self.stopped = False  # the request is over: metering what is left would change its record
        self.fault: Exception | None = None  # a bug of ours in a callback: the request ends on it
        self.ended_ns: int | None = None  # the upstream's last bytes arrived (its body complete)
        self.wake: asyncio.Future[None] | None = None
        self.loop = asyncio.get_running_loop()
        self.queued = False  # a job of ours waits in the loop's metering queue (turns.py)
        # Bytes forwarded, not yet metered: at most one upstream read, as reading pauses meanwhile.
        self.backlog: deque[tuple[memoryview, int]] = deque()

    def feed(self, data: bytes, now: int) -> None:
        try:
            self._forward(data, now)
        except Exception as exc:  # ours: raised into the HTTP parser it would read as a malformed upstream
            self._fail(exc)

    def _forward(self, data: bytes, now: int) -> None:
        meter = self.meter
        if meter is not None:
            if self.backlog or len(data) > METER_SLICE:
                self._defer(data, now)
            elif not self._meter(meter, data, now):
                return
            elif meter.inflating:  # a compressed piece past this turn's inflation budget
                self._defer(b"", now)
        elif self.record is None:
            self.dog.activity(True)  # unmeasured path: any bytes are progress
        client = self.client
        if client.is_closing():
            if not self.client_gone:
                self.client_gone = True
                self._wake()
            return
        client.write(b"%x\r\n%b\r\n" % (len(data), data) if self.framed else data)
        if client.get_write_buffer_size() > HIGH_WATER and not self.paused:
            self.paused = True
            self.dog.hold(True)
            self._pause_upstream()
            self._wake()

    on_body = feed  # tokenpace.wire.exchange.Reader: the head came before, the end is awaited in run

    def _meter(self, meter: Meter, data: bytes, now: int) -> bool:
        """Meters one piece; False when the stream was cut (an event past the bound)."""
        try:
            meter.feed(data, now)
        except Exception as exc:  # the meter must never break the bytes it forwards
            meter.sse = None
            meter.protocol_error = meter.protocol_error or f"meter failed ({type(exc).__name__})"
        n = meter.record.output_tokens_counted
        if n != self.tokens:
            if self.itl is not None:
                self.itl.note(now, n - self.tokens)
            self.tokens = n
            self.dog.activity(True)
        elif meter.sse is None or meter.error or meter.protocol_error:
            self.dog.activity(True)  # nothing to count tokens by: bytes are progress
        sse = meter.sse
        if sse is not None:
            pending = sse.pending_len > 0
            if pending is (self.dog.partial_since is None):  # only when it changes
                self.dog.partial(pending)
            if meter.overflow is not None:
                self._cut()
                return False
        return True

    def _defer(self, data: bytes, now: int) -> None:
        if not self.backlog:
            self._pause_upstream()
        if not self.queued:
            self.queued = True
            turns_of(self.loop).ask(self._meter_slice)
        self.backlog.append((memoryview(data), now))

    def _fail(self, exc: Exception) -> None:
        """Stop relaying and metering; ``run`` raises it (``InternalFault``) in the request's handler."""
        if self.fault is None:
            self.fault = exc
        self.stopped = True
        self.backlog.clear()
        self._pause_upstream()  # no more pieces: the connection is dropped once ``run`` raises
        self._wake()

    def _meter_slice(self) -> bool:
        """The queue's job: one slice; True while more of the backlog is left."""
        try:
            more = self._meter_next_slice()
        except Exception as exc:  # ours: a loop callback's exception would only be logged
            self._fail(exc)
            more = False
        self.queued = more
        return more

    def _meter_next_slice(self) -> bool:
        """One slice of the backlog per round; reading resumes when it is all metered."""
        meter = self.meter
        if self.stopped or meter is None or not self.backlog:
            self.backlog.clear()
            return False
        data, now = self.backlog[0]
        if len(data) > METER_SLICE:
            self.backlog[0] = (data[METER_SLICE:], now)
            data = data[:METER_SLICE]
        else:
            self.backlog.popleft()
        if not self._meter(meter, bytes(data), now):
            self.backlog.clear()
        elif meter.inflating:  # the rest of this piece's inflation: next turn, before newer pieces
            self.backlog.appendleft((memoryview(b""), now))
        if self.backlog:
            return True
        if not self.paused:
            self._resume_upstream()
        self._wake()
        return False

    def _pause_upstream(self) -> None:
        self.conn.pause_reading()

    def _resume_upstream(self) -> None:
        self.conn.resume_reading()

    def _cut(self) -> None:
        """An event past the bound: no client could read this stream either; end it on both sides
        (the upstream's close reaches ``run`` as a mid-body error, the proxy then aborts the client)."""
        if not self.conn.closed:
            self.conn.abort()

    def _wake(self) -> None:
        if self.wake is not None and not self.wake.done():
            self.wake.set_result(None)

    async def _client_drained(self) -> None:
        """Until the client has read its buffer down: woken by the transport's flow control (its
        low-water mark), not by polling; a client gone ends the wait too."""
        if self.drain is not None:
            with contextlib.suppress(ConnectionError):
                await self.drain()
            return
        while self.client.get_write_buffer_size() > LOW_WATER and not self.client.is_closing():
            await asyncio.sleep(0.005)

    def stop(self) -> None:
        """The request is over (finished, cut or timed out): meter nothing more into its record."""
        self.stopped = True
        self.backlog.clear()
        if self.meter is not None:
            self.meter.release()

    async def run(self, ex: Exchange) -> None:
        """Until the body is complete and metered (raises ExchangeError if the upstream broke it), or
        the client went away (``client_gone``)."""
        loop = self.loop
        ex.attach(self)
        while not self.client_gone and self.fault is None:
            if self.paused:  # also after the upstream is done: the client must read what is held
                await self._client_drained()
                self.paused = False
                self.dog.hold(False)
                if not self.backlog:
                    self._resume_upstream()
                continue
            if ex.done.done() and not self.backlog:
                break
            self.wake = loop.create_future()
            waits = (self.wake,) if ex.done.done() else (ex.done, self.wake)
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        if self.fault is not None:
            raise InternalFault(self.fault)
        if not self.client_gone:
            ex.done.result()
            self.ended_ns = self.conn.now  # the connection's time of its last read: the body's end
