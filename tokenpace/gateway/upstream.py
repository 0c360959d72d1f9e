"""The upstream side: the shared HTTP/1.1 kernel (tokenpace.wire.http1.client), no per-chunk task switch.

Each body piece is handed to a callback inside ``data_received`` (timestamp taken first), which
meters it and writes it straight to the client's transport. Connections are kept alive and pooled
per origin.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable
from time import perf_counter_ns
from urllib.parse import urlsplit

from tokenpace.wire.http1.client import ResponseConnection

OnBody = Callable[[bytes, int], None]


class UpstreamError(Exception):
    """The upstream connection failed; ``mid_body`` says whether response headers had arrived."""

    def __init__(self, message: str, mid_body: bool) -> None:
        super().__init__(message)
        self.mid_body = mid_body


class Exchange:
    """One request/response on an upstream connection; its ``response_*`` methods are the HTTP/1.1
    kernel's events (tokenpace.wire.http1.client)."""

    __slots__ = (
        "chunked",
        "done",
        "head",
        "headers",
        "length",
        "on_body",
        "pending",
        "reason",
        "status",
    )

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.head = loop.create_future()  # set at headers complete
        self.done = loop.create_future()  # set at message complete; exception if the connection broke
        self.status = 0
        self.reason = b""
        self.headers: list[tuple[bytes, bytes]] = []
        self.length: int | None = None
        self.chunked = False
        self.on_body: OnBody | None = None
        self.pending: list[tuple[bytes, int]] = []  # body that arrived before on_body was attached

    def attach(self, on_body: OnBody) -> None:
        """From now on body pieces go to ``on_body`` as they arrive; earlier ones are replayed."""
        pending, self.pending = self.pending, []
        self.on_body = on_body
        for data, now in pending:
            on_body(data, now)

    # events from the connection
    def response_header(self, name: bytes, low_name: bytes, value: bytes) -> None:
        self.headers.append((name, value))
        if low_name == b"content-length":
            self.length = int(value) if value.strip().isdigit() else None
        elif low_name == b"transfer-encoding" and b"chunked" in value.lower():
            self.chunked = True

    def response_interim(self) -> None:
        self.headers.clear()  # a 1xx's; the real response follows
        self.reason = b""

    def response_head(self, status: int, now: int) -> None:
        self.status = status
        self.head.set_result(None)

    def response_body(self, data: bytes, now: int) -> None:
        if self.on_body is not None:
            self.on_body(data, now)
        else:
            self.pending.append((data, now))

    def response_end(self, now: int) -> None:
        if not self.done.done():
            self.done.set_result(None)

    def response_lost(self, exc: Exception | None, now: int, body_ended: bool) -> None:
        if body_ended:
            self.response_end(now)  # body delimited by the connection's close
        else:
            self.fail(f"upstream closed the connection ({type(exc).__name__ if exc else 'EOF'})")

    def response_malformed(self, reason: str, now: int) -> None:
        self.fail(reason)

    def fail(self, message: str) -> None:
        mid = self.head.done()
        if not mid:
            self.head.set_exception(UpstreamError(message, False))
            self.head.exception()  # retrieved here: the waiter may be gone
        if not self.done.done():
            self.done.set_exception(UpstreamError(message, mid))
            self.done.exception()  # retrieved here: a waiter may be gone (client left)


class UpstreamConnection(ResponseConnection):
    """The shared HTTP/1.1 kernel, keeping the reason phrase for the client."""

    __slots__ = ()
    exchange: Exchange | None

    def on_status(self, status: bytes) -> None:
        if self.exchange is not None:
            self.exchange.reason += status


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
        oldest = perf_counter_ns() - int(self.keepalive_s * 1e9)
        while self.idle:
            conn = self.idle.pop()
            if conn.reusable and conn.idle_since_ns > oldest:
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
        # the client's bytes unchanged: obs-text arrives as surrogates (see gateway/header_bytes.py)
        parts.append(f"{k}: {v}\r\n".encode("utf-8", "surrogateescape"))
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
        ex = Exchange(loop)
        conn.start(ex, payload, head_only=method == "HEAD")
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
