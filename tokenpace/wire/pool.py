"""The one keep-alive pool and the one resend rule, for the benchmark client and the gateway.

Connections to one endpoint are reused while the server keeps them open (learned per run, see
keepalive.py). A request written to a reused connection that the server then closes before
answering is resent once only when it provably went unread: the server's TCP acknowledged none of
its bytes (the server had closed first). A request the server may have read is never resent unless
the caller allows it (the client's ``--resend-unanswered``): a POST is not sent twice by accident.
"""

from __future__ import annotations

import asyncio
import ssl
from dataclasses import dataclass
from time import perf_counter_ns

from tokenpace.wire.connection import HttpConnection
from tokenpace.wire.dial import DialTimes, Resolver, dial
from tokenpace.wire.endpoint import Endpoint
from tokenpace.wire.exchange import Exchange, ExchangeError, Reader
from tokenpace.wire.keepalive import PROBE_S, KeepAlive
from tokenpace.wire.liveness import look_before_send, peer_has_closed

NOT_RESENT = "the server's TCP had received the request, so it may have been read: not resent"
REUSE_DROPPED = (
    "the server dropped a request on a reused keep-alive connection without answering: "
    "each later request opened a new connection"
)


def may_resend(conn: HttpConnection, ex: Exchange, reused: bool, allow_unanswered: bool) -> bool:
    """The resend rule: a reused connection closed before any response, and the server's TCP never
    acknowledged the request (or the caller allows resending what it may have read)."""
    return reused and ex.unanswered and (allow_unanswered or conn.request_never_delivered)


@dataclass(slots=True)
class SendTimes:
    """When a request asked for a connection, had one (dialled or reused) and was written out
    (``perf_counter_ns``; filled by ``Pool.request`` when a caller asks, e.g. the gateway's spans).
    After a resend, the connection and writing are the last attempt's."""

    asked_ns: int = 0
    connected_ns: int | None = None
    reused: bool = False
    written_ns: int | None = None


class Pool:
    """Keep-alive connections to one endpoint. ``open`` (every connection not yet closed) is bounded
    by the callers' concurrency; ``idle`` by ``open``."""

    def __init__(
        self,
        endpoint: Endpoint,
        ssl_context: ssl.SSLContext | None = None,
        reuse: bool = True,
        max_idle_s: float | None = None,
        look_s: float = PROBE_S,
        wait_for_look: bool = True,
    ) -> None:
        self.endpoint = endpoint
        self.keepalive = KeepAlive(reuse)  # reuse False: a new connection per request, on purpose
        self.look_s = look_s  # how long a finished connection of an unjudged kind is looked at
        self.wait_for_look = wait_for_look  # callers wait for that look rather than dial
        self.max_idle_ns = None if max_idle_s is None else int(max_idle_s * 1e9)
        self.ssl_context = ssl_context if ssl_context is not None else endpoint.ssl_context()
        self._resolver = Resolver()
        self.idle: list[HttpConnection] = []
        self.open: set[HttpConnection] = set()
        self.closing = False
        self.connections_opened = 0
        # Until a look has judged the server after a kind of response (keepalive.known), finished
        # connections wait here (at most the callers' concurrency) and callers wait on ``judging``
        # (at most look_s) rather than dial, unless ``wait_for_look`` is off (the gateway): a closed
        # loop's whole first wave ends within those few milliseconds, and dialling a second
        # connection for each of its users put that wave's next requests behind hundreds of
        # connects (362 connections for 256 streams, a 13 ms P99 at wave 2).
        self._looking: list[HttpConnection] = []
        self.judging: asyncio.Future[None] | None = None

    def take(self) -> HttpConnection | None:
        """An idle connection the server has not closed (checked just before use), else None. The
        same look notes what the server's TCP had acknowledged before the request the caller is
        about to write (``mark_send``, for the resend rule): one TCP_INFO read a reused request."""
        oldest = None if self.max_idle_ns is None else perf_counter_ns() - self.max_idle_ns
        while self.idle:
            conn = self.idle.pop()
            if (oldest is None or conn.idle_since_ns > oldest) and conn.reusable:
                closed, acked = look_before_send(conn.transport)
                if not closed:
                    conn.mark_send(acked)
                    return conn
            self.drop(conn)  # closed by the server (or idle too long): nothing was sent on it
        return None

    async def connect(self) -> tuple[HttpConnection, DialTimes]:
        """A new connection; raises like asyncio's create_connection (OSError, ssl.SSLError, ...)."""
        conn, times = await dial(self.endpoint.host, self.endpoint.port, self.ssl_context, self._resolver)
        self.connections_opened += 1
        self.open.add(conn)
        return conn, times

    def release(self, conn: HttpConnection) -> None:
        """A finished exchange's connection: kept for reuse, or closed."""
        if self.closing or not (conn.reusable and self.keepalive.reuses(conn.chunked)):
            self.drop(conn)
        elif self.keepalive.known(conn.chunked):
            self.idle.append(conn)
        else:  # until the server has shown whether it closes after this kind of response, look first
            self._look(conn)

    def _look(self, conn: HttpConnection) -> None:
        self._looking.append(conn)
        if self.judging is None:
            loop = asyncio.get_running_loop()
            self.judging = loop.create_future()
            loop.call_later(self.look_s, self._judge, conn)

    async def wait_for_judgement(self) -> HttpConnection | None:
        """``take()`` after the look under way has judged the server (at most ``look_s``): a caller
        that found no idle connection in the meantime reuses one instead of dialling. None when
        there is still none to take."""
        if self.judging is not None:
            await asyncio.shield(self.judging)  # one caller cancelled must not cancel the others' wait
        return self.take()

    def _judge(self, first: HttpConnection) -> None:
        """A look: the server's behaviour after ``first``'s kind of response judged on ``first``;
        every connection finished meanwhile after that kind is then kept (take() looks at each
        again before use) or closed; one after the other kind gets a look of its own."""
        looking, self._looking = self._looking, []
        judging, self.judging = self.judging, None  # the waiters hold it; later callers dial as usual
        keepalive = self.keepalive
        if not self.closing:
            closed = not first.reusable or peer_has_closed(first.transport)
            keepalive.judge(first.chunked, closed, self.look_s)
        for conn in looking:
            if not self.closing and not keepalive.known(conn.chunked):
                self._look(conn)
            elif (
                self.closing
                or not (conn.reusable and keepalive.reuses(conn.chunked))
                or peer_has_closed(conn.transport)
            ):
                self.drop(conn)
            else:
                self.idle.append(conn)
        if judging is not None and not judging.done():
            judging.set_result(None)

    def drop(self, conn: HttpConnection) -> None:
        conn.close()
        self.open.discard(conn)

    def close(self) -> None:
        self.closing = True
        for conn in list(self.open):
            conn.close()
        self.idle.clear()
        self._looking.clear()
        self.open.clear()
        judging, self.judging = self.judging, None
        if judging is not None and not judging.done():
            judging.set_result(None)

    async def request(
        self,
        payload: bytes,
        head_only: bool,
        connect_timeout_s: float,
        times: SendTimes | None = None,
        reader: Reader | None = None,
    ) -> tuple[HttpConnection, Exchange]:
        """Sends ``payload`` and returns once the response head arrived; resent at most once, by the
        resend rule. Raises ExchangeError (no head), or OSError/TimeoutError when connecting fails.
        ``times``: filled as it goes (three clock reads a request, none when not asked)."""
        loop = asyncio.get_running_loop()
        if times is not None:
            times.asked_ns = perf_counter_ns()
        for attempt in (0, 1):
            idle = self.take()
            if idle is None and self.judging is not None and self.wait_for_look:
                idle = await self.wait_for_judgement()
            reused = idle is not None
            if idle is None:
                conn, _ = await asyncio.wait_for(self.connect(), connect_timeout_s)
            else:
                conn = idle  # take() noted what the server's TCP had acknowledged before this request
            if times is not None:
                times.connected_ns, times.reused = perf_counter_ns(), reused
            ex = Exchange(loop, reader)
            conn.start(ex, payload, head_only=head_only)
            if times is not None:
                times.written_ns = perf_counter_ns()
            try:
                await ex.head
            except ExchangeError as exc:
                self.drop(conn)
                if attempt == 0 and may_resend(conn, ex, reused, allow_unanswered=False):
                    continue  # an idle close raced the write: nothing to learn about the server
                if reused and ex.unanswered:
                    self.keepalive.stop(REUSE_DROPPED)  # the next request must not meet it again
                    why = f"{exc} on a reused keep-alive connection: {NOT_RESENT}"
                    raise ExchangeError(why, mid_body=False) from None
                raise
            except BaseException:
                self.drop(conn)
                raise
            return conn, ex
        raise AssertionError("unreachable: the second attempt returns or raises")
