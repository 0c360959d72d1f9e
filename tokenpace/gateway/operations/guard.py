"""The client-facing server's defences: slow or idle connections are closed, the number of open
connections is capped, malformed requests get a plain 400, and each of these is counted in
/metrics and logged at most once per kind per 10 s (see ratelog.py), never with a traceback or a
header value.

aiohttp's ``RequestHandler`` is subclassed to see three moments it does not expose: bytes of a
request begin (header timer starts), the head is parsed (timer stops; the body timeout is the
handler's, in proxy.py) and the response is done (idle timer starts).
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from aiohttp import http_exceptions, web
from aiohttp.web_protocol import RequestHandler

from tokenpace.gateway.observability.prom import GuardMetrics
from tokenpace.gateway.observability.ratelog import RateLimitedLog
from tokenpace.wire.websocket import MaskedFrames

_BUSY_BODY = b"too many open connections\n"
_BUSY_REFUSAL = (
    b"HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nRetry-After: 1\r\n"
    b"Content-Type: text/plain\r\nContent-Length: %d\r\n\r\n%b" % (len(_BUSY_BODY), _BUSY_BODY)
)
_HEAD_TIMEOUT = b"HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"


@dataclass(frozen=True, slots=True)
class GuardLimits:
    header_timeout_s: float = 10.0  # from a request's first byte (or a new connection) to its full head
    body_timeout_s: float = 30.0  # from the head to the last byte of the request body
    idle_timeout_s: float = 60.0  # a kept-alive connection with no request
    max_connections: int = 1024  # open client connections; more are refused with a 503


class Guard:
    """Shared by every connection of one listener: limits, counters, the rate-limited log."""

    def __init__(self, limits: GuardLimits, metrics: GuardMetrics, log: RateLimitedLog) -> None:
        self.limits = limits
        self.metrics = metrics
        self.log = log
        self.open = 0

    def rejected(self, reason: str, peer: object, status: int) -> None:
        self.metrics.rejected.labels(reason).inc()
        self.log(reason, f"answered {status} to {_host(peer)}: {reason.replace('_', ' ')}")

    def closed(self, reason: str, peer: object) -> None:
        self.metrics.closed.labels(reason).inc()
        self.log(reason, f"closed a connection from {_host(peer)}: {reason.replace('_', ' ')}")


class _Phase(enum.Enum):
    HEAD = 1  # waiting for (the rest of) a request head
    BUSY = 2  # a request is being handled
    IDLE = 3  # kept alive between requests


class GuardedHandler(RequestHandler):
    def __init__(self, manager: web.Server, guard: Guard, **kwargs: object) -> None:
        super().__init__(manager, **kwargs)  # type: ignore[arg-type]
        self.guard = guard
        self.phase = _Phase.HEAD
        self.refused = False
        self.head_begun = False  # bytes of the current request head have arrived
        self.timer: asyncio.TimerHandle | None = None

    # --- connection ---
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        guard = self.guard
        if guard.open >= guard.limits.max_connections:
            self.refused = True  # never handed to aiohttp: no task, no parser, no timer
            guard.closed("max_connections", transport.get_extra_info("peername"))
            transport.write(_BUSY_REFUSAL)  # type: ignore[attr-defined]
            transport.close()
            return
        guard.open += 1
        guard.metrics.open.inc()
        super().connection_made(transport)
        self._arm(guard.limits.header_timeout_s, "header_timeout")  # its first head must come in time

    def connection_lost(self, exc: BaseException | None) -> None:
        if self.refused:
            return
        self.guard.open -= 1
        self.guard.metrics.open.dec()
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self.refused:
            return
        if self.phase is _Phase.IDLE and data:
            self.phase = _Phase.HEAD
            self._arm(self.guard.limits.header_timeout_s, "header_timeout")
        self.head_begun = True
        before = self._request_count
        super().data_received(data)
        if self._request_count != before and self.phase is _Phase.HEAD:
            self.phase = _Phase.BUSY  # a head is complete (or refused): the handler takes over
            self._disarm()

    async def _handle_request(
        self,
        request: web.BaseRequest,
        start_time: float | None,
        request_handler: Callable[[web.BaseRequest], Awaitable[web.StreamResponse]],
    ) -> tuple[web.StreamResponse, bool]:
        self.phase = _Phase.BUSY
        self._disarm()
        try:
            return await super()._handle_request(request, start_time, request_handler)
        finally:
            if not self._messages and self.transport is not None:  # idle now (and still open)
                self.phase = _Phase.IDLE
                self.head_begun = False
                self._arm(self.guard.limits.idle_timeout_s, "idle_timeout")

    # --- timers ---
    def _arm(self, seconds: float, reason: str) -> None:
        self._disarm()
        self.timer = self._loop.call_later(seconds, self._expire, reason)

    def _disarm(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def _expire(self, reason: str) -> None:
        self.timer = None
        if self.phase is _Phase.BUSY or self.transport is None:
            return
        self.guard.closed(reason, self.transport.get_extra_info("peername"))
        if reason == "header_timeout" and self.head_begun:  # a silent connection gets no answer
            self.transport.write(_HEAD_TIMEOUT)
        self.force_close()

    # --- errors: one counted, rate-limited line; no traceback, no header value ---
    def set_parser(self, parser: Any, data_received_cb: Callable[[], None] | None = None) -> None:
        """A WebSocket session's frames: every one a client sends must be masked (aiohttp's reader
        does not check); the first that is not ends the session with 1002."""
        super().set_parser(MaskedFrames(parser), data_received_cb)  # type: ignore[arg-type]  # duck-typed

    def handle_error(
        self,
        request: web.BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        reason = _reject_reason(exc) if status == 400 else "internal_error"
        self.guard.rejected(reason, request.remote, status)
        if request.writer.output_size > 0:
            raise ConnectionError("response already started: cannot send an error")
        phrase = HTTPStatus(status).phrase if status in HTTPStatus._value2member_map_ else "Error"
        resp = web.Response(status=status, text=f"{status} {phrase}\n", content_type="text/plain")
        resp.force_close()
        return resp

    def log_exception(self, *args: object, **kw: object) -> None:
        self.guard.log("internal_error", "an internal error (details withheld; see /metrics)")


def fit_to_open_files(wanted: int) -> int:
    """The connection cap the process's open-files limit can hold: each proxied connection needs
    two descriptors (client and upstream), plus a margin for the store, scrapers and listeners."""
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (ImportError, ValueError, OSError):
        return wanted
    if soft == resource.RLIM_INFINITY:
        return wanted
    return max(1, min(wanted, (soft - 64) // 2))


def _reject_reason(exc: BaseException | None) -> str:
    if isinstance(exc, http_exceptions.BadHttpMethod):
        return "bad_method"
    if isinstance(exc, http_exceptions.InvalidURLError):
        return "bad_url"
    if isinstance(exc, http_exceptions.LineTooLong):
        return "line_too_long"
    if isinstance(exc, http_exceptions.InvalidHeader):
        return "bad_header"
    if isinstance(exc, http_exceptions.BadStatusLine):
        return "bad_request_line"
    if isinstance(exc, http_exceptions.BadHttpMessage) and "header" in str(exc.message).lower():
        return "bad_header"  # the message names the field, never shown: only its kind is kept
    return "malformed_http"


def _host(peer: object) -> str:
    if isinstance(peer, tuple) and peer:
        return str(peer[0])
    return str(peer) if isinstance(peer, str) else "unknown"


async def listen(
    runner: web.AppRunner, guard: Guard, host: str, port: int, reuse_port: bool = False
) -> asyncio.AbstractServer:
    """Serve ``runner``'s app on host:port, each connection a GuardedHandler. ``reuse_port``:
    several processes listen on the port and the kernel spreads connections over them."""
    loop = asyncio.get_running_loop()
    server = runner.server
    assert server is not None, "runner.setup() first"
    kwargs = dict(server._kwargs)

    def factory() -> GuardedHandler:
        return GuardedHandler(server, guard, loop=loop, **kwargs)

    return await loop.create_server(
        factory, host, port, backlog=1024, reuse_address=True, reuse_port=reuse_port or None
    )
