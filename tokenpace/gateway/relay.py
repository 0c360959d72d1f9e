"""The per-chunk hot path: meter a body piece and write it straight to the client's transport.

Runs inside the upstream connection's ``data_received``: no task switch, no await, one transport
write per piece. When the client reads slower than the upstream writes, upstream reading pauses.
"""

from __future__ import annotations

import asyncio

from tokenpace.core.record import RequestRecord
from tokenpace.gateway.meter import Meter
from tokenpace.gateway.watchdog import Watchdog
from tokenpace.wire.connection import HttpConnection
from tokenpace.wire.exchange import Exchange

HIGH_WATER = 256 * 1024  # client-side buffered bytes before upstream reading pauses
LOW_WATER = 64 * 1024


class Relay:
    __slots__ = (
        "client",
        "client_gone",
        "conn",
        "dog",
        "framed",
        "meter",
        "paused",
        "record",
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
    ) -> None:
        self.client = client
        self.conn = conn
        self.meter = meter
        self.record = record
        self.dog = dog
        self.framed = framed  # chunked transfer coding towards the client
        self.tokens = 0
        self.paused = False
        self.client_gone = False
        self.wake: asyncio.Future[None] | None = None

    def feed(self, data: bytes, now: int) -> None:
        meter = self.meter
        if meter is not None:
            try:
                meter.feed(data, now)
            except Exception as exc:  # the meter must never break the bytes it forwards
                meter.sse = None
                meter.protocol_error = meter.protocol_error or f"meter failed ({type(exc).__name__})"
            n = len(meter.record.token_ns)
            if n != self.tokens:
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
                    return
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
            self.conn.transport.pause_reading()  # type: ignore[union-attr]
            self._wake()

    on_body = feed  # tokenpace.wire.exchange.Reader: the head came before, the end is awaited in run

    def on_head(self, ex: Exchange, now: int) -> None:
        pass

    def on_end(self, now: int) -> None:
        pass

    def on_failed(self, reason: str, now: int, lost: bool) -> None:
        pass

    def _cut(self) -> None:
        """An event past the bound: no client could read this stream either; end it on both sides
        (the upstream's close reaches ``run`` as a mid-body error, the proxy then aborts the client)."""
        if not self.conn.closed:
            self.conn.abort()

    def _wake(self) -> None:
        if self.wake is not None and not self.wake.done():
            self.wake.set_result(None)

    async def run(self, ex: Exchange) -> None:
        """Until the body is complete (raises ExchangeError if the upstream broke it), or the client
        went away (``client_gone``)."""
        loop = asyncio.get_running_loop()
        ex.attach(self)
        while not ex.done.done() and not self.client_gone:
            self.wake = loop.create_future()
            await asyncio.wait((ex.done, self.wake), return_when=asyncio.FIRST_COMPLETED)
            if self.paused:
                while self.client.get_write_buffer_size() > LOW_WATER and not self.client.is_closing():
                    await asyncio.sleep(0.005)
                self.paused = False
                if self.conn.transport is not None and not self.conn.closed:
                    self.conn.transport.resume_reading()
        if not self.client_gone:
            ex.done.result()
