"""A lean HTTP/1.1 client for the upstreams: asyncio protocol + httptools, no per-chunk task switch.

Each body piece is handed to a callback inside ``data_received`` (timestamp taken first), which
meters it and writes it straight to the client's transport. Connections are kept alive and pooled
per origin.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable
from time import monotonic, perf_counter_ns
from urllib.parse import urlsplit

import httptools

OnBody = Callable[[bytes, int], None]
MAX_HEAD_BYTES = 64 * 1024  # status line and headers of one response (real ones are < 4 KiB)


class UpstreamError(Exception):
    """The upstream connection failed; ``mid_body`` says whether response headers had arrived."""

    def __init__(self, message: str, mid_body: bool) -> None:
        super().__init__(message)
        self.mid_body = mid_body


class Exchange:
    """One request/response on an upstream connection."""

    __slots__ = (
        "chunked",
        "complete",
        "done",
        "head",
        "headers",
        "length",
        "on_body",
        "pending",
        "reason",
        "status",
    )

    def __init__(self, loop: asyncio.AbstractEventLoop, head_only: bool) -> None:
        self.head = loop.create_future()  # set at headers complete
        self.done = loop.create_future()  # set at message complete; exception if the connection broke
        self.status = 0
        self.reason = b""
        self.headers: list[tuple[bytes, bytes]] = []
        self.length: int | None = None
        self.chunked = False
        self.complete = head_only  # HEAD: no body follows the headers
        self.on_body: OnBody | None = None
        self.pending: list[tuple[bytes, int]] = []  # body that arrived before on_body was attached

    def attach(self, on_body: OnBody) -> None:
        """From now on body pieces go to ``on_body`` as they arrive; earlier ones are replayed."""
        pending, self.pending = self.pending, []
        self.on_body = on_body
        for data, now in pending:
            on_body(data, now)

    def _body(self, data: bytes, now: int) -> None:
        if self.on_body is not None:
            self.on_body(data, now)
        else:
            self.pending.append((data, now))


class UpstreamConnection(asyncio.Protocol):
    __slots__ = ("closed", "exchange", "head_bytes", "idle_since", "keep_alive", "now", "parser", "transport")

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.exchange: Exchange | None = None
        self.now = 0
        self.keep_alive = True
        self.closed = False
        self.idle_since = monotonic()
        self.head_bytes = 0  # bytes of the current response before its head was complete

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.now = perf_counter_ns()
        ex = self.exchange
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(f"malformed HTTP response: {exc}")
            self.abort()
            return
        if ex is not None and not ex.head.done():
            self.head_bytes += len(data)
            if self.head_bytes > MAX_HEAD_BYTES:  # an endless head would grow without end
                self._fail(f"response head over {MAX_HEAD_BYTES // 1024} KiB")
                self.abort()

    def eof_received(self) -> bool | None:
        return None  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        ex = self.exchange
        if ex is None:
            return
        if ex.head.done() and ex.length is None and not ex.chunked and not ex.complete:
            self.on_message_complete()  # body delimited by the connection's close
            return
        self._fail(f"upstream closed the connection ({type(exc).__name__ if exc else 'EOF'})")

    def _fail(self, message: str) -> None:
        ex, self.exchange = self.exchange, None
        self.keep_alive = False
        if ex is None:
            return
        mid = ex.head.done()
        if not mid:
            ex.head.set_exception(UpstreamError(message, False))
            ex.head.exception()  # retrieved here: the waiter may be gone
        if not ex.done.done():
            ex.done.set_exception(UpstreamError(message, mid))
            ex.done.exception()  # retrieved here: a waiter may be gone (client left)

    # httptools callbacks
    def on_status(self, status: bytes) -> None:
        if self.exchange is not None:
            self.exchange.reason += status

    def on_header(self, name: bytes, value: bytes) -> None:
        ex = self.exchange
        if ex is None:
            return
        ex.headers.append((name, value))
        low = name.lower()
        if low == b"content-length":
            ex.length = int(value) if value.strip().isdigit() else None
        elif low == b"transfer-encoding" and b"chunked" in value.lower():
            ex.chunked = True

    def on_headers_complete(self) -> None:
        ex = self.exchange
        self.keep_alive = self.parser.should_keep_alive()
        if ex is None:
            return
        ex.status = self.parser.get_status_code()
        if ex.status < 200:  # 1xx: interim, the real response follows
            ex.headers.clear()
            ex.reason = b""
            return
        ex.head.set_result(None)
        if ex.complete:  # HEAD
            self.keep_alive = False  # the parser cannot know no body follows; do not reuse
            self.on_message_complete()

    def on_body(self, body: bytes) -> None:
        if self.exchange is not None:
            self.exchange._body(body, self.now)

    def on_message_complete(self) -> None:
        ex, self.exchange = self.exchange, None
        if ex is None or ex.status < 200:
            self.exchange = ex  # interim response: keep waiting
            return
        ex.complete = True
        self.idle_since = monotonic()
        if not ex.done.done():
            ex.done.set_result(None)

    # ours
    @property
    def reusable(self) -> bool:
        return not self.closed and self.keep_alive and self.exchange is None

    def start(self, exchange: Exchange, payload: bytes) -> None:
        self.exchange = exchange
        self.head_bytes = 0
        self.transport.write(payload)  # type: ignore[union-attr]

    def abort(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.abort()


class Origin:
    """Pooled keep-alive connections to one scheme://host:port."""

    def __init__(self, url: str, connect_timeout_s: float, keepalive_s: float = 30.0) -> None:
        parts = urlsplit(url)
        self.host = parts.hostname or "127.0.0.1"
        self.tls = parts.scheme == "https"
        self.port = parts.port or (443 if self.tls else 80)
        default_port = (self.port == 443) if self.tls else (self.port == 80)
        host = f"[{self.host}]" if ":" in self.host else self.host
        self.host_header = (host if default_port else f"{host}:{self.port}").encode()
        self.connect_timeout_s = connect_timeout_s
        self.keepalive_s = keepalive_s
        self.idle: list[UpstreamConnection] = []
        self._ssl: ssl.SSLContext | None = ssl.create_default_context() if self.tls else None

    async def connect(self) -> UpstreamConnection:
        loop = asyncio.get_running_loop()
        _, proto = await asyncio.wait_for(
            loop.create_connection(
                UpstreamConnection,
                self.host,
                self.port,
                ssl=self._ssl,
                server_hostname=self.host if self.tls else None,
            ),
            self.connect_timeout_s,
        )
        return proto

    def pooled(self) -> UpstreamConnection | None:
        oldest = monotonic() - self.keepalive_s
        while self.idle:
            conn = self.idle.pop()
            if conn.reusable and conn.idle_since > oldest:
                return conn
            conn.abort()
        return None

    def release(self, conn: UpstreamConnection) -> None:
        if conn.reusable:
            self.idle.append(conn)
        else:
            conn.abort()

    def close(self) -> None:
        for conn in self.idle:
            conn.abort()
        self.idle.clear()


def request_bytes(
    method: str, target: str, host: bytes, headers: list[tuple[str, str]], body: bytes
) -> bytes:
    parts = [f"{method} {target} HTTP/1.1\r\n".encode("latin-1"), b"Host: ", host, b"\r\n"]
    for k, v in headers:
        parts.append(f"{k}: {v}\r\n".encode("latin-1"))
    if body or method in ("POST", "PUT", "PATCH"):
        parts.append(b"Content-Length: %d\r\n" % len(body))
    parts.append(b"\r\n")
    parts.append(body)
    return b"".join(parts)


async def send(origin: Origin, method: str, payload: bytes) -> tuple[UpstreamConnection, Exchange]:
    """Sends on a pooled connection (retrying once on a fresh one if it had gone stale); returns
    when the response headers arrived. Raises UpstreamError or OSError/TimeoutError on connect."""
    loop = asyncio.get_running_loop()
    conn = origin.pooled()
    reused = conn is not None
    while True:
        if conn is None:
            conn = await origin.connect()
        ex = Exchange(loop, method == "HEAD")
        conn.start(ex, payload)
        try:
            await ex.head
        except UpstreamError:
            if reused:  # a kept-alive connection the upstream had closed: one fresh try
                reused, conn = False, None
                continue
            raise
        except BaseException:
            conn.abort()
            raise
        return conn, ex
