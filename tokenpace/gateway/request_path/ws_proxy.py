"""The Realtime WebSocket proxy: the upgrade is passed on, every message (text, binary, ping, pong,
close) is relayed both ways with its payload and opcode unchanged, and a copy of the text events is
measured (realtime_meter.py).

Bounds: a message (all its frames) is at most ``MAX_MESSAGE`` bytes either way (larger closes both
sides with 1009); each direction reads its next message only once the previous one is written out
(aiohttp's writer drains past 64 KiB, its reader pauses the socket past 64 KiB queued), so a slow
reader on one side slows the other. When either side closes, the other is closed with the same code.
A frame breaking RFC 6455's masking rule ends the session with 1002 whichever side sent it: a
client's unmasked frame (the listener's guard) or an upstream's masked one (``UpstreamWebSocket``);
neither is relayed, and the upstream's is recorded as its protocol error. Any frame of the
upstream's that aiohttp's reader refuses (bad framing, a message too large) is recorded the same
way: the upstream's protocol error, never the client's disconnect.

Work: each direction relays under the loop's work budget (wire/http1/turn_budget.py), a message
``UNITS_PER_MESSAGE`` units, at most ``MESSAGES_PER_TURN`` a turn, and waits for the loop's next
round past either, so a flood of pings from either side (aiohttp hands queued messages over without
yielding) takes one share of a turn, as an HTTP peer of one-byte chunks does. Closing reads the
peer's close under the same budget, for at most ``CLOSE_DRAIN_MESSAGES`` messages, then drops the
connection (aiohttp's own close read a flood's queue to the end in one go).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any, Literal

import aiohttp
from aiohttp import web

from tokenpace.gateway.config.config import Upstream
from tokenpace.gateway.messages import errors
from tokenpace.gateway.metering.outcome import Outcome, internal_error_text
from tokenpace.gateway.metering.realtime_meter import RealtimeMeter
from tokenpace.wire.http1.turn_budget import next_turn, turn_budget
from tokenpace.wire.websocket import MaskedFrames

MAX_MESSAGE = 16 * 1024 * 1024  # bytes of one WebSocket message, either way
MESSAGES_PER_TURN = 32  # messages one direction relays in one loop turn (then the loop's next round)
# A relayed message's share of the loop's work units (a parsed HTTP piece is one): relaying one costs
# tens of microseconds (a frame written, a send), a parsed piece about one.
UNITS_PER_MESSAGE = 8
# Messages a closing session reads while it waits for the peer's close (a flood of pings keeps them
# coming): past it the connection is dropped, the session ended as abnormal (1006).
CLOSE_DRAIN_MESSAGES = 1024
_NOT_FORWARDED = frozenset(
    h.lower()
    for h in (
        "Host",
        "Connection",
        "Upgrade",
        "Sec-WebSocket-Key",
        "Sec-WebSocket-Version",
        "Sec-WebSocket-Extensions",  # no compression is negotiated: payloads stay as they are
        "Sec-WebSocket-Protocol",  # passed as aiohttp's protocols
        "Content-Length",
        "Transfer-Encoding",
        "Keep-Alive",
        "Proxy-Authorization",
    )
)
if TYPE_CHECKING:
    _WsClient = aiohttp.ClientWebSocketResponse[bool]  # generic (its decode mode) in newer aiohttp only
    _WsTexts = aiohttp.ClientWebSocketResponse[Literal[True]]  # the session class: texts decoded
else:
    _WsClient = _WsTexts = aiohttp.ClientWebSocketResponse
_WsBoth = web.WebSocketResponse | _WsClient
perf_ns = time.perf_counter_ns


def ws_url(origin: str, base_path: str, path_qs: str) -> str:
    scheme, rest = origin.split("://", 1)
    return ("wss" if scheme == "https" else "ws") + "://" + rest + base_path + path_qs


MASKED_BY_UPSTREAM = "the upstream sent a masked WebSocket frame (a server must not mask: RFC 6455 5.1)"


class UpstreamWebSocket(_WsTexts):
    """aiohttp's client session whose frame reader sits behind the masking rule for a server's
    frames: aiohttp sets its reader as ``_parser`` and hands that attribute to the connection, so
    the reader is wrapped as it is set, before any frame (even one sent with the 101) is read."""

    masked_frames: MaskedFrames | None = None

    @property
    def _parser(self) -> Any:
        return self.__dict__.get("_gated_parser")

    @_parser.setter
    def _parser(self, parser: Any) -> None:
        if parser is not None and not isinstance(parser, MaskedFrames):
            parser = self.masked_frames = MaskedFrames(parser, from_client=False)
        self.__dict__["_gated_parser"] = parser

    @property
    def sent_masked_frame(self) -> bool:
        return self.masked_frames is not None and self.masked_frames.broken

    async def close(self, *, code: int = 1000, message: bytes = b"") -> bool:
        return await _bounded_close(self, functools.partial(super().close, code=code, message=message))


class ClientWebSocket(web.WebSocketResponse):
    """The client's half of a proxied session; its close is bounded as the upstream's is."""

    async def close(self, *, code: int = 1000, message: bytes = b"", drain: bool = True) -> bool:
        close = functools.partial(super().close, code=code, message=message, drain=drain)
        return await _bounded_close(self, close)


class _BoundedDrain:
    """What aiohttp's ``close`` reads the peer's close from: its message queue, read under the
    loop's budget a share a turn and for at most ``CLOSE_DRAIN_MESSAGES`` messages (aiohttp reads
    every queued message until the close without yielding while any is queued: a ping flood held
    the loop for seconds); past them the read fails, and aiohttp drops the connection."""

    def __init__(self, queue: Any) -> None:
        self.queue = queue
        self.left = CLOSE_DRAIN_MESSAGES
        self.share = MESSAGES_PER_TURN
        self.turn = turn_budget()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.queue, name)

    def feed_data(self, data: Any, size: int) -> None:
        self.queue.feed_data(data, size)

    async def read(self) -> Any:
        if self.left <= 0:
            raise ConnectionResetError(f"no close from the peer within {CLOSE_DRAIN_MESSAGES} messages")
        self.left -= 1
        self.share -= 1
        if self.share <= 0 or self.turn.left <= 0:
            self.share = _messages(await next_turn(self.turn))
        self.turn.spend(UNITS_PER_MESSAGE)
        return await self.queue.read()


def _messages(units: int) -> int:
    """The messages a share of the loop's turn pays for (one at least: every round moves on)."""
    return max(1, min(MESSAGES_PER_TURN, units // UNITS_PER_MESSAGE))


async def _bounded_close(ws: Any, close: Callable[[], Awaitable[bool]]) -> bool:
    """aiohttp's ``close`` with its queue read through ``_BoundedDrain`` for the while."""
    queue = ws._reader
    if queue is not None:
        ws._reader = _BoundedDrain(queue)
    try:
        return await close()
    finally:
        ws._reader = queue


class UpstreamSessions:
    """The aiohttp client that opens the upstream half of every proxied session (made on first use)."""

    def __init__(self, connect_timeout_s: float) -> None:
        self.connect_timeout_s = connect_timeout_s
        self.http: aiohttp.ClientSession | None = None

    def client(self) -> aiohttp.ClientSession:
        if self.http is None:
            # sock_read bounds the upgrade's answer only: aiohttp lifts it once the session is open
            t = self.connect_timeout_s
            timeout = aiohttp.ClientTimeout(total=None, sock_connect=t, sock_read=t)
            self.http = aiohttp.ClientSession(
                timeout=timeout, auto_decompress=False, ws_response_class=UpstreamWebSocket
            )
        return self.http

    async def close(self) -> None:
        if self.http is not None:
            await self.http.close()


async def proxy_session(
    request: web.Request, sessions: UpstreamSessions, upstream: Upstream, meter: RealtimeMeter
) -> web.StreamResponse:
    """Opens the upstream's session first, so that a refusal reaches the client as its status."""
    url = ws_url(upstream.origin, upstream.base_path, request.rel_url.raw_path_qs)
    headers = {k: v for k, v in request.headers.items() if k.lower() not in _NOT_FORWARDED}
    if upstream.auth is not None and "Authorization" not in request.headers:
        headers["Authorization"] = upstream.auth
    offered = request.headers.get("Sec-WebSocket-Protocol", "")
    try:
        up = await sessions.client().ws_connect(
            url,
            headers=headers,
            protocols=tuple(p.strip() for p in offered.split(",") if p.strip()),
            max_msg_size=MAX_MESSAGE,
            autoping=False,  # pings and pongs are relayed, not answered here
            timeout=aiohttp.ClientWSTimeout(ws_close=sessions.connect_timeout_s),
            compress=0,
        )
    except aiohttp.WSServerHandshakeError as exc:
        meter.session_failed(Outcome.HTTP_ERROR, f"HTTP {exc.status}: WebSocket upgrade refused", exc.status)
        status = exc.status if exc.status >= 400 else 502
        message = f"upstream {upstream.name!r} refused the WebSocket upgrade (HTTP {exc.status})"
        return errors.error_response(status, message, "upstream_error", "upgrade_refused")
    except (aiohttp.ClientError, OSError, asyncio.TimeoutError) as exc:
        meter.session_failed(Outcome.CONNECT_ERROR, f"{type(exc).__name__}: {exc}")
        return errors.bad_gateway(upstream.name)
    try:
        return await relay_session(request, up, meter)
    finally:
        if not up.closed:
            await up.close()


async def relay_session(request: web.Request, up: _WsClient, meter: RealtimeMeter) -> web.WebSocketResponse:
    down = ClientWebSocket(
        protocols=(up.protocol,) if up.protocol else (),
        max_msg_size=MAX_MESSAGE,
        autoping=False,
        compress=False,
    )
    await down.prepare(request)
    # The first close seen (code, reason, the side that sent it): passed on to the other side.
    closes: list[tuple[int, str, str]] = []
    to_up = asyncio.ensure_future(_pump(down, up, meter.from_client, closes))
    broken = functools.partial(meter.close, Outcome.PROTOCOL_ERROR)
    to_down = asyncio.ensure_future(_pump(up, down, meter.from_upstream, closes, broken))
    try:
        done, _ = await asyncio.wait((to_up, to_down), return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:  # the client's connection went away
        meter.close(Outcome.CLIENT_DISCONNECT, "the client went away")
        raise
    finally:
        for task in (to_up, to_down):
            task.cancel()
        code, reason, _ = closes[0] if closes else (1001, "", "client")  # 1001: the client went away
        with contextlib.suppress(Exception):
            await asyncio.wait_for(up.close(code=code, message=reason.encode()), 1.0)
    fault = _our_fault(done)
    if fault is not None:  # a bug of ours, not either peer's doing: the open responses say so
        meter.close(Outcome.INTERNAL_ERROR, internal_error_text(fault))
        closes.insert(0, (1011, "", "gateway"))  # 1011: the server met an unexpected condition
    elif (closes[0][2] if closes else "client" if to_up in done else "upstream") == "client":
        meter.close(Outcome.CLIENT_DISCONNECT, "the client closed the session mid-response")
    else:
        meter.close(Outcome.UPSTREAM_ABORT_MID_STREAM, "the upstream closed the session mid-response")
    code, reason, _ = closes[0] if closes else (_code(up), "", "upstream")
    with contextlib.suppress(Exception):
        await asyncio.wait_for(down.close(code=code, message=reason.encode()), 1.0)
    return down


async def _pump(
    src: _WsBoth,
    dst: _WsBoth,
    seen: Callable[[str, int], None],
    closes: list[tuple[int, str, str]],
    broken: Callable[[str], None] | None = None,
) -> None:
    """Relays messages until ``src`` closes (then closes ``dst`` with its code) or breaks;
    ``broken`` (given for the upstream's side only) is told why, before anything else, when the
    upstream broke the protocol (the open responses end on that reason, whatever the closing
    handshake does next)."""
    turn = turn_budget()
    left = MESSAGES_PER_TURN
    while True:
        if left <= 0 or turn.left <= 0:  # this turn's share spent: the loop's next round
            left = _messages(await next_turn(turn))
        msg = await src.receive()
        left -= 1
        turn.spend(UNITS_PER_MESSAGE)
        kind = msg.type
        if kind is aiohttp.WSMsgType.TEXT:
            with contextlib.suppress(Exception):  # the meter never breaks the relay
                seen(msg.data, perf_ns())
            await dst.send_str(msg.data)
        elif kind is aiohttp.WSMsgType.BINARY:
            await dst.send_bytes(msg.data)
        elif kind is aiohttp.WSMsgType.PING:
            await dst.ping(msg.data)
        elif kind is aiohttp.WSMsgType.PONG:
            await dst.pong(msg.data)
        else:  # CLOSE (answered by aiohttp), CLOSING, CLOSED, ERROR (1009 for a message too large)
            code = msg.data if kind is aiohttp.WSMsgType.CLOSE else _code(src)
            if isinstance(msg.data, aiohttp.WebSocketError):  # 1009 (too large), 1002 (bad framing)
                code = msg.data.code
                if broken is not None:
                    broken(_upstream_fault(src, msg.data))
            reason = msg.extra if kind is aiohttp.WSMsgType.CLOSE and msg.extra else ""
            # before the await: a cancelled pump still passes it on
            closes.append((code, reason[:123], "client" if broken is None else "upstream"))
            await dst.close(code=code, message=reason.encode()[:123])
            return


def _upstream_fault(src: _WsBoth, exc: aiohttp.WebSocketError) -> str:
    """Why the upstream's frames were refused, in the record's words."""
    if isinstance(src, UpstreamWebSocket) and src.sent_masked_frame:
        return MASKED_BY_UPSTREAM
    return f"the upstream broke the WebSocket protocol ({exc.code}): {exc}"[:200]


def _our_fault(done: Iterable[asyncio.Future[None]]) -> BaseException | None:
    """An ended pump's exception that is not the network's (every one is retrieved: none is left
    for asyncio to log with its traceback)."""
    fault = None
    for task in done:
        exc = None if task.cancelled() else task.exception()
        if exc is not None and not isinstance(exc, (OSError, aiohttp.ClientError, asyncio.TimeoutError)):
            fault = exc
    return fault


def _code(ws: _WsBoth) -> int:
    code = ws.close_code
    return code if code is not None and code not in (1005, 1006) else 1011
