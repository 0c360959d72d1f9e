"""Requests over WebSocket sessions (``--api realtime``): a Sender whose connections are sessions.

A session is opened (HTTP upgrade, then the server's ``session.created``) when no idle one is left and
kept for later requests, one response at a time. Every event is timestamped as it is read, parsed
once and given to the dialect, the same way an SSE chunk is.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from time import perf_counter_ns
from typing import TYPE_CHECKING, Any

import aiohttp
import orjson

from tokenpace.client.sender import Sender
from tokenpace.core.record import RequestRecord, Status
from tokenpace.wire.dialects.base import ANSWER, ERROR, Dialect, Sampling, error_text
from tokenpace.wire.endpoint import Endpoint

if TYPE_CHECKING:
    _Ws = aiohttp.ClientWebSocketResponse[bool]  # generic (its decode mode) in newer aiohttp only
else:
    _Ws = aiohttp.ClientWebSocketResponse
_CLOSED = (
    aiohttp.WSMsgType.CLOSE,
    aiohttp.WSMsgType.CLOSING,
    aiohttp.WSMsgType.CLOSED,
    aiohttp.WSMsgType.ERROR,
)


class RealtimeSender(Sender):
    def __init__(
        self,
        endpoint: Endpoint,
        dialect: Dialect,
        model: str,
        timeout_s: float = 300.0,
        headers: dict[str, str] | None = None,
        reuse_connections: bool = True,
        ssl_context: ssl.SSLContext | None = None,
        extra_body: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(
            endpoint, dialect, model, Sampling(), True, timeout_s, headers, reuse_connections, ssl_context
        )
        self.extra_body = extra_body or {}  # merged into each response.create's "response"
        ep = self.endpoint
        scheme = "wss" if ep.tls else "ws"
        query = "model=" + self.model
        self.ws_url = f"{scheme}://{ep.host_header}{ep.path_for(self.dialect.path)}"
        self.ws_url += ("&" if "?" in self.ws_url else "?") + query
        self._extra_headers = dict(headers or {})
        self._closing_tasks: set[asyncio.Task[Any]] = set()
        self._http: aiohttp.ClientSession | None = None
        self._sessions: list[_Ws] = []  # idle
        self._all: set[_Ws] = set()

    def prepare(
        self,
        prompt: str,
        max_tokens: int,
        request_id: str,
        messages: list[dict[str, str]] | None = None,
        traceparent: str | None = None,  # a WebSocket event has no headers: not propagated
    ) -> bytes:
        event = self.dialect.body(prompt, max_tokens, self.model, self.sampling, True, messages)
        if self.extra_body:
            event["response"].update(self.extra_body)
        return orjson.dumps(event)

    async def send(
        self, record: RequestRecord, payload: bytes, capture: list[bytes] | None = None
    ) -> RequestRecord:
        record.sent_ns = perf_counter_ns()
        ws = self._sessions.pop() if self._sessions and self.keepalive.reuse else None
        try:
            if ws is None or ws.closed:
                ws = await asyncio.wait_for(self._open_session(record), self.timeout_s)
                if ws is None:
                    return record
            await asyncio.wait_for(self._exchange(ws, record, payload, capture), self.timeout_s)
        except (asyncio.TimeoutError, TimeoutError):
            _fail(record, Status.TIMEOUT, f"no complete response within {self.timeout_s:g}s")
        except asyncio.CancelledError:
            _fail(record, Status.CANCELLED, "cancelled by the user")
            if ws is not None:
                self._drop_session(ws)
            raise
        if ws is not None:
            if record.status is Status.OK and not ws.closed and self.keepalive.reuse:
                self._sessions.append(ws)
            else:
                self._drop_session(ws)
        return record

    async def _open_session(self, record: RequestRecord) -> _Ws | None:
        if self._http is None:
            self._http = aiohttp.ClientSession()
        start = perf_counter_ns()
        try:
            ws = await self._http.ws_connect(
                self.ws_url, headers=self._extra_headers, ssl=self._ssl or False, autoping=True
            )
        except aiohttp.WSServerHandshakeError as exc:
            _fail(record, Status.HTTP_ERROR, f"HTTP {exc.status}: WebSocket upgrade refused")
            record.http_status = exc.status
            return None
        except (aiohttp.ClientError, OSError) as exc:
            _fail(record, Status.CONNECT_ERROR, f"cannot open a WebSocket to {self.ws_url}: {exc}")
            return None
        self._all.add(ws)
        self.pool.connections_opened += 1
        first = await ws.receive()  # session.created: the session is ready
        if first.type is not aiohttp.WSMsgType.TEXT:
            _fail(record, Status.PROTOCOL_ERROR, "the WebSocket session did not start with an event")
            self._drop_session(ws)
            return None
        record.connect_ns = perf_counter_ns() - start
        return ws

    async def _exchange(
        self,
        ws: _Ws,
        rec: RequestRecord,
        payload: bytes,
        capture: list[bytes] | None,
    ) -> None:
        await ws.send_str(payload.decode())
        rec.request_ns = perf_counter_ns()
        rec.http_status = 101
        classify = self.dialect.classify
        while True:
            msg = await ws.receive()
            now = perf_counter_ns()
            if rec.headers_ns is None:
                rec.headers_ns = now  # the first event of the answer: the nearest thing to headers
            if msg.type in _CLOSED:
                _fail(rec, Status.STREAM_INTERRUPTED, "the WebSocket closed mid-response", now)
                return
            if msg.type is not aiohttp.WSMsgType.TEXT:
                continue
            try:
                event = orjson.loads(msg.data)
                flags = classify(event, rec)
            except (orjson.JSONDecodeError, AttributeError, TypeError, KeyError, ValueError) as exc:
                _fail(rec, Status.PROTOCOL_ERROR, f"unexpected event ({exc}): {msg.data[:60]!r}", now)
                return
            if flags & ERROR:
                _fail(rec, Status.STREAM_INTERRUPTED, f"server error in stream: {error_text(event)}", now)
                return
            if flags:
                rec.note_token_chunk(now, bool(flags & ANSWER))
                if capture is not None:
                    capture.append(msg.data.encode())
            if event.get("type") == "response.done":
                rec.end_ns = now
                rec.status = Status.OK
                return

    def _drop_session(self, ws: _Ws) -> None:
        self._all.discard(ws)
        if not ws.closed:
            task = asyncio.ensure_future(ws.close())
            self._closing_tasks.add(task)
            task.add_done_callback(self._closing_tasks.discard)

    async def close(self) -> None:
        for ws in list(self._all):
            with contextlib.suppress(Exception):
                await ws.close()
        self._all.clear()
        self._sessions.clear()
        if self._http is not None:
            await self._http.close()
            self._http = None
        await super().close()


def _fail(record: RequestRecord, status: Status, reason: str, now: int | None = None) -> None:
    if record.end_ns is None or status is not Status.OK:
        record.end_ns = now if now is not None else perf_counter_ns()
    record.status = status
    record.error = reason
