"""Sends prepared requests over the wire's keep-alive pool and times every one."""

from __future__ import annotations

import asyncio
import socket
import ssl
from time import perf_counter_ns
from typing import Any

import orjson

from tokenpace import __version__
from tokenpace.client.exchange import Measure
from tokenpace.core.record import RequestRecord, Status
from tokenpace.wire.connection import HttpConnection
from tokenpace.wire.dialects.base import Dialect, Sampling
from tokenpace.wire.endpoint import Endpoint
from tokenpace.wire.exchange import Exchange
from tokenpace.wire.pool import NOT_RESENT, REUSE_DROPPED, Pool, may_resend
from tokenpace.wire.request import request_bytes, request_head

_NOT_RESENT = f"{NOT_RESENT} (--resend-unanswered resends it once, recorded)"


def _lower(headers: dict[str, str] | None) -> set[str]:
    return {k.lower() for k in headers or {}}


class Sender:
    """Builds request bytes ahead of time and sends them; one instance per run and process."""

    def __init__(
        self,
        endpoint: Endpoint,
        dialect: Dialect,
        model: str,
        sampling: Sampling,
        stream: bool = True,
        timeout_s: float = 300.0,
        headers: dict[str, str] | None = None,
        reuse_connections: bool = True,
        ssl_context: ssl.SSLContext | None = None,
        resend_unanswered: bool = False,
        extra_body: dict[str, Any] | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.dialect = dialect
        self.model = model
        self.sampling = sampling
        self.stream = stream
        self.extra_body = extra_body or {}  # e.g. vLLM's --extra-body: merged over every request body
        self.timeout_s = timeout_s
        self.pool = Pool(endpoint, ssl_context, reuse_connections)
        self.keepalive = self.pool.keepalive
        self._ssl = self.pool.ssl_context
        # True: a request a reused connection dropped unanswered is sent once more (recorded).
        self.resend_unanswered = resend_unanswered
        fixed = [
            ("Content-Type", "application/json"),
            ("Accept", "text/event-stream" if stream else "application/json"),
            ("User-Agent", f"tokenpace/{__version__}"),
        ]
        fixed += [(k, v) for k, v in dialect.headers if k.lower() not in _lower(headers)]
        fixed += list((headers or {}).items())
        self._head = request_head("POST", endpoint.path_for(dialect.path), endpoint.host_header, fixed)

    @property
    def connections_opened(self) -> int:
        return self.pool.connections_opened

    def prepare(
        self,
        prompt: str,
        max_tokens: int,
        request_id: str,
        messages: list[dict[str, str]] | None = None,
        traceparent: str | None = None,
    ) -> bytes:
        """The request's bytes, built before its send time so building never delays sending."""
        fields = self.dialect.body(prompt, max_tokens, self.model, self.sampling, self.stream, messages)
        if self.extra_body:
            fields.update(self.extra_body)
        head = self._head + b"x-request-id: %b\r\n" % request_id.encode("latin-1")
        if traceparent:
            head += b"traceparent: %b\r\n" % traceparent.encode("latin-1")
        return request_bytes(head, orjson.dumps(fields))

    async def send(
        self, record: RequestRecord, payload: bytes, capture: list[bytes] | None = None
    ) -> RequestRecord:
        """Send and wait for the full response; failures end up on the record, never raised.
        ``capture`` (multi-turn sessions only) receives the raw token-carrying chunks. One coroutine
        a request (no inner one): at 256 streams every frame is paid 256 times at each turnaround."""
        record.sent_ns = perf_counter_ns()
        loop = asyncio.get_running_loop()
        # One timer for the whole request, connecting included (no task or timer of its own per
        # connect: a closed loop's first wave opens hundreds at once, while the first tokens arrive).
        deadline = _Deadline(asyncio.current_task(loop), self.timeout_s)
        timer = loop.call_at(loop.time() + self.timeout_s, deadline.fire)
        pool = self.pool
        try:
            for attempt in (0, 1):
                conn = pool.take()  # a reused one: what the server's TCP had acknowledged is noted
                if conn is None and pool.judging is not None:
                    conn = await pool.wait_for_judgement()  # the first wave: a few ms, not a connect
                reused = conn is not None
                if conn is None:
                    deadline.measure = None
                    conn = await self._connect(record, deadline)
                    if conn is None:
                        return record
                measure = Measure(record, self.dialect, self.stream, loop)
                measure.conn = conn
                if capture is not None:
                    capture.clear()  # a retry on a fresh connection starts the answer again
                    measure.capture = capture
                deadline.measure, deadline.conn = measure, conn
                exchange = measure.exchange
                try:
                    conn.start(exchange, payload)
                    record.request_ns = perf_counter_ns()
                    await exchange.done
                except asyncio.CancelledError:
                    measure.fail(Status.CANCELLED, "cancelled by the user", perf_counter_ns())
                    pool.drop(conn)
                    raise
                if not (reused and exchange.unanswered and record.status is Status.STREAM_INTERRUPTED):
                    break
                if not self._resend(record, conn, exchange, attempt):
                    break
            if conn is not None:  # always, once the loop ran (mypy cannot tell)
                pool.release(conn)
            return record
        finally:
            timer.cancel()

    def _resend(self, record: RequestRecord, conn: HttpConnection, exchange: Exchange, attempt: int) -> bool:
        """A reused connection closed after the request was written, before any answer: resend it
        (True, the record reset for the second attempt) or not (False, the record says why)."""
        pool = self.pool
        pool.drop(conn)
        pool.keepalive.stop(REUSE_DROPPED)
        if attempt == 1 or not may_resend(conn, exchange, True, self.resend_unanswered):
            record.error = f"{record.error} on a reused keep-alive connection: {_NOT_RESENT}"
            return False
        record.first_sent_ns = record.sent_ns
        record.attempts += 1
        record.sent_ns = perf_counter_ns()
        _reset(record)
        return True

    async def close(self) -> None:
        self.pool.close()
        await asyncio.sleep(0)

    @property
    def open_connections(self) -> int:
        return len(self.pool.open)

    async def _connect(self, record: RequestRecord, deadline: _Deadline) -> HttpConnection | None:
        start = perf_counter_ns()
        ep = self.endpoint
        try:
            conn, times = await self.pool.connect()
        except asyncio.CancelledError:
            if not deadline.fired or deadline.cancelled_by_others():
                raise
            _fail(record, Status.TIMEOUT, f"no connection within {self.timeout_s:g}s")
            return None
        except TimeoutError:  # the OS's own ETIMEDOUT
            _fail(record, Status.CONNECT_ERROR, f"connecting to {ep.host}:{ep.port} timed out in the OS")
            return None
        except socket.gaierror as exc:
            _fail(record, Status.CONNECT_ERROR, f"DNS lookup of {ep.host} failed: {exc.strerror}")
            return None
        except ssl.SSLError as exc:
            _fail(record, Status.CONNECT_ERROR, f"TLS handshake failed: {exc.reason or exc}")
            return None
        except ConnectionRefusedError:
            _fail(record, Status.CONNECT_ERROR, f"connection refused by {ep.host}:{ep.port}")
            return None
        except OSError as exc:
            _fail(
                record, Status.CONNECT_ERROR, f"cannot connect to {ep.host}:{ep.port}: {exc.strerror or exc}"
            )
            return None
        record.connect_ns = perf_counter_ns() - start
        record.dns_ns, record.tcp_ns, record.tls_ns = times.dns_ns, times.tcp_ns, times.tls_ns
        return conn


class _Deadline:
    """The request's one timer: while connecting it stops the connect (by cancelling the request's
    task, told apart from a user's cancel); afterwards it fails the exchange and closes its
    connection."""

    __slots__ = ("conn", "fired", "measure", "task", "timeout_s")

    def __init__(self, task: asyncio.Task[Any] | None, timeout_s: float) -> None:
        self.task = task
        self.timeout_s = timeout_s
        self.measure: Measure | None = None  # None: connecting
        self.conn: HttpConnection | None = None
        self.fired = False

    def fire(self) -> None:
        self.fired = True
        measure, conn = self.measure, self.conn
        if measure is None or conn is None:
            if self.task is not None:
                self.task.cancel()
            return
        rec = measure.record
        got = f"{rec.output_tokens_counted} token chunks received" if rec.headers_ns else "no response"
        measure.fail(
            Status.TIMEOUT, f"no complete response within {self.timeout_s:g}s ({got})", perf_counter_ns()
        )
        conn.close()

    def cancelled_by_others(self) -> bool:
        """After the deadline's own cancel is taken back: is another cancel (the user's) pending?"""
        uncancel = getattr(self.task, "uncancel", None)  # Python 3.11+
        return uncancel is not None and uncancel() > 0


def _fail(record: RequestRecord, status: Status, reason: str) -> None:
    record.end_ns = perf_counter_ns()
    record.status = status
    record.error = reason


def _reset(record: RequestRecord) -> None:
    record.status = Status.OK
    record.error = None
    record.end_ns = None
    record.headers_ns = None
    record.http_status = None
