"""Sends prepared requests over pooled keep-alive connections and times every one."""

from __future__ import annotations

import asyncio
import socket
import ssl
from time import perf_counter_ns
from typing import Any

import orjson

from tokenpace import __version__
from tokenpace.client.exchange import Exchange
from tokenpace.core.record import RequestRecord, Status
from tokenpace.wire.connection import HttpConnection
from tokenpace.wire.dial import Resolver, dial
from tokenpace.wire.dialects.base import Dialect, Sampling
from tokenpace.wire.endpoint import Endpoint
from tokenpace.wire.keepalive import PROBE_S, KeepAlive
from tokenpace.wire.liveness import peer_has_closed

_STALE = "connection closed before the response headers"
_NOT_RESENT = (
    "the server's TCP had received the request, so it may have been read: not resent "
    "(--resend-unanswered resends it once, recorded)"
)


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
        self.keepalive = KeepAlive(reuse_connections)  # False: a new connection per request, on purpose
        # True: a request a reused connection dropped unanswered is sent once more (recorded).
        self.resend_unanswered = resend_unanswered
        self._ssl = ssl_context if ssl_context is not None else endpoint.ssl_context()
        self._idle: list[HttpConnection] = []
        self._open: set[HttpConnection] = set()
        self._closing = False
        self._resolver = Resolver()
        self.connections_opened = 0
        lines = [
            f"POST {endpoint.path_for(dialect.path)} HTTP/1.1",
            f"Host: {endpoint.host_header}",
            "Content-Type: application/json",
            f"Accept: {'text/event-stream' if stream else 'application/json'}",
            f"User-Agent: tokenpace/{__version__}",
        ]
        lines += [f"{k}: {v}" for k, v in dialect.headers if k.lower() not in _lower(headers)]
        lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
        self._head = ("\r\n".join(lines) + "\r\n").encode("latin-1")

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
        body = orjson.dumps(fields)
        trace = f"traceparent: {traceparent}\r\n" if traceparent else ""
        tail = f"Content-Length: {len(body)}\r\nx-request-id: {request_id}\r\n{trace}\r\n"
        return self._head + tail.encode("latin-1") + body

    async def send(
        self, record: RequestRecord, payload: bytes, capture: list[bytes] | None = None
    ) -> RequestRecord:
        """Send and wait for the full response; failures end up on the record, never raised.
        ``capture`` (multi-turn sessions only) receives the raw token-carrying chunks."""
        record.sent_ns = perf_counter_ns()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout_s
        for attempt in (0, 1):
            conn = self._take_idle()
            reused = conn is not None
            if conn is None:
                conn = await self._connect(record, deadline)
                if conn is None:
                    return record
            future = loop.create_future()
            exchange = Exchange(record, self.dialect, self.stream, future)
            if capture is not None:
                capture.clear()  # a retry on a fresh connection starts the answer again
                exchange.capture = capture
            timer = loop.call_at(deadline, self._on_timeout, exchange, conn, self.timeout_s)
            if reused:
                conn.mark_send()  # what the server's TCP had acknowledged before this request
            try:
                conn.start(exchange, payload)
                record.request_ns = perf_counter_ns()
                await future
            except asyncio.CancelledError:
                exchange.fail(Status.CANCELLED, "cancelled by the user", perf_counter_ns())
                conn.close()
                self._open.discard(conn)
                raise
            finally:
                timer.cancel()
            unanswered = (
                reused
                and record.status is Status.STREAM_INTERRUPTED
                and record.error is not None
                and record.error.startswith(_STALE)
            )
            if not unanswered:
                break
            # A reused connection closed after the request was written, before any answer. Resent
            # once when the server provably never received it (its TCP acknowledged none of it:
            # the server had closed first), or when the user allowed any resend; recorded either way.
            conn.close()
            self._open.discard(conn)
            self.keepalive.stop(
                "the server dropped a request on a reused keep-alive connection without answering: "
                "each later request opened a new connection"
            )
            if attempt == 1 or not (conn.request_never_delivered or self.resend_unanswered):
                record.error = f"{_STALE} on a reused keep-alive connection: {_NOT_RESENT}"
                break
            record.first_sent_ns = record.sent_ns
            record.attempts += 1
            record.sent_ns = perf_counter_ns()
            _reset(record)
        if conn is not None:
            self._release(conn)
        return record

    async def close(self) -> None:
        self._closing = True
        for conn in list(self._open):
            conn.close()
        self._idle.clear()
        self._open.clear()
        await asyncio.sleep(0)

    @property
    def open_connections(self) -> int:
        return len(self._open)

    # --- pool ---
    def _take_idle(self) -> HttpConnection | None:
        while self._idle:
            conn = self._idle.pop()
            if conn.reusable and not peer_has_closed(conn.transport):
                return conn
            conn.close()  # closed by the server while idle: nothing was sent on it
            self._open.discard(conn)
        return None

    def _release(self, conn: HttpConnection) -> None:
        if not (conn.reusable and self.keepalive.reuse):
            self._drop(conn)
        elif self.keepalive.known:
            self._idle.append(conn)
        else:  # until the server has shown whether it closes after answering, look first
            asyncio.get_running_loop().call_later(PROBE_S, self._release_after_look, conn)

    def _release_after_look(self, conn: HttpConnection) -> None:
        if self._closing:
            return
        closed = not conn.reusable or peer_has_closed(conn.transport)
        self.keepalive.judge(closed)
        if closed or not self.keepalive.reuse:
            self._drop(conn)
        else:
            self._idle.append(conn)

    def _drop(self, conn: HttpConnection) -> None:
        conn.close()
        self._open.discard(conn)

    async def _connect(self, record: RequestRecord, deadline: float) -> HttpConnection | None:
        loop = asyncio.get_running_loop()
        start = perf_counter_ns()
        ep = self.endpoint
        try:
            conn, times = await asyncio.wait_for(
                dial(ep.host, ep.port, self._ssl, self._resolver), timeout=max(0.001, deadline - loop.time())
            )
        except (asyncio.TimeoutError, TimeoutError) as exc:
            # On 3.11+ these are one class, and the OS's own ETIMEDOUT is one too: tell them apart.
            if getattr(exc, "errno", None):
                _fail(record, Status.CONNECT_ERROR, f"connecting to {ep.host}:{ep.port} timed out in the OS")
            else:
                _fail(record, Status.TIMEOUT, f"no connection within {self.timeout_s:g}s")
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
        self.connections_opened += 1
        self._open.add(conn)
        return conn

    @staticmethod
    def _on_timeout(exchange: Exchange, conn: HttpConnection, timeout_s: float) -> None:
        rec = exchange.record
        got = f"{rec.output_tokens_counted} token chunks received" if rec.headers_ns else "no response"
        exchange.fail(
            Status.TIMEOUT, f"no complete response within {timeout_s:g}s ({got})", perf_counter_ns()
        )
        conn.close()


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
