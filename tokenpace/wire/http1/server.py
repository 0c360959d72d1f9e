"""The server half of HTTP/1.1 on asyncio transports and httptools: keep-alive, pipelining,
``Expect: 100-continue`` and chunked streaming, no framework.

Shared by the simulator and the scripted test server. The sim writes hundreds of streams per engine
step; a framework's per-write coroutine and buffering would cost more than the whole engine model,
so responses are plain transport writes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from http import HTTPStatus

import httptools

CHUNKED_END = b"0\r\n\r\n"
MAX_BODY_BYTES = 16 * 1024 * 1024  # one request's body (a long prompt is well under 1 MiB)


@dataclass(slots=True)
class HttpRequest:
    method: str
    path: str  # without the query string
    headers: dict[str, str]  # names lower-cased
    body: bytes
    keep_alive: bool
    conn: ServerConnection = field(repr=False)


def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Status"


def _ignore(conn: ServerConnection) -> None:
    return None


class ServerConnection(asyncio.Protocol):
    """One client connection. Requests are answered one at a time, in order: a pipelined request
    waits until the response before it has ended (``respond`` or ``end_stream``)."""

    def __init__(
        self,
        handler: Callable[[HttpRequest], None],
        on_open: Callable[[ServerConnection], None] = _ignore,
        on_close: Callable[[ServerConnection], None] = _ignore,
        max_body: int = MAX_BODY_BYTES,
    ) -> None:
        self._handler = handler
        self.max_body = max_body  # a larger body is refused with 413 (at once, before 100 Continue)
        self._on_open, self._on_close = on_open, on_close
        self._parser = httptools.HttpRequestParser(self)
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.on_lost: Callable[[], None] | None = None  # set by whoever answers the current request
        self.upgraded: Callable[[bytes], None] | None = None  # gets every byte after switch_protocols
        self._url = b""
        self._headers: dict[str, str] = {}
        self._body: list[bytes] = []
        self._body_len = 0
        self._refused = False  # answered 413: nothing more is read from this connection
        self._busy = False
        self._queue: list[HttpRequest] = []
        self._keep_alive = True

    # ---- asyncio.Protocol ----------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self._on_open(self)

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        if self.upgraded is not None:
            self.upgraded(data)
            return
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade as upgrade:
            if self.upgraded is None:  # the handler did not switch (it answered, or will not)
                self._keep_alive = False
                self.close()
            elif len(data) > upgrade.args[0]:
                self.upgraded(data[upgrade.args[0] :])  # the new protocol's first bytes came along
        except httptools.HttpParserError:
            if not self._refused:  # else a callback refused the request and answered it itself
                self._fail(400, b"malformed HTTP request")

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._on_close(self)
        cb, self.on_lost = self.on_lost, None
        if cb is not None:
            cb()

    # ---- httptools callbacks -------------------------------------------------------------------
    def on_message_begin(self) -> None:
        self._url, self._headers, self._body, self._body_len = b"", {}, [], 0

    def on_url(self, url: bytes) -> None:
        self._url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers[name.decode("latin-1").lower()] = value.decode("latin-1")

    def on_headers_complete(self) -> None:
        length = self._headers.get("content-length", "")
        if length.isdigit() and int(length) > self.max_body:
            self._refuse_body()  # before any 100 Continue: the client need not send the body
            return
        # curl and others wait (a whole second, for curl) for this before sending a large body.
        if self._headers.get("expect", "").lower() == "100-continue" and self.transport is not None:
            self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")

    def on_body(self, body: bytes) -> None:
        self._body_len += len(body)
        if self._body_len > self.max_body:  # chunked, or longer than it said
            self._refuse_body()
            return
        self._body.append(body)

    def _refuse_body(self) -> None:
        self._refused = True
        self._fail(413, b"request body over %d bytes" % self.max_body)
        raise httptools.HttpParserCallbackError("body refused")  # stop parsing this connection

    def on_message_complete(self) -> None:
        req = HttpRequest(
            method=self._parser.get_method().decode("latin-1"),
            path=self._url.split(b"?", 1)[0].decode("latin-1"),
            headers=self._headers,
            body=b"".join(self._body),
            keep_alive=self._parser.should_keep_alive(),
            conn=self,
        )
        if self._busy:
            self._queue.append(req)
        else:
            self._dispatch(req)

    # ---- responding ----------------------------------------------------------------------------
    def _dispatch(self, req: HttpRequest) -> None:
        self._busy = True
        self._keep_alive = req.keep_alive
        self._handler(req)

    def _done(self) -> None:
        self._busy = False
        self.on_lost = None
        if not self._keep_alive:
            self.close()
        elif self._queue and not self.closed:
            self._dispatch(self._queue.pop(0))

    def _head(self, status: int, headers: list[tuple[str, str]], framing: str) -> bytes:
        lines = [f"HTTP/1.1 {status} {_reason(status)}"]
        lines += [f"{k}: {v}" for k, v in headers]
        lines.append(framing)
        if not self._keep_alive:
            lines.append("connection: close")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    def respond(self, status: int, body: bytes, headers: list[tuple[str, str]]) -> None:
        """The whole response at once; the next pipelined request is answered after it."""
        if self.closed or self.transport is None:
            return
        self.transport.write(self._head(status, headers, f"content-length: {len(body)}") + body)
        self._done()

    def start_stream(self, status: int, headers: list[tuple[str, str]]) -> None:
        if not self.closed and self.transport is not None:
            self.transport.write(self._head(status, headers, "transfer-encoding: chunked"))

    def write_chunk(self, data: bytes) -> None:
        """One piece of the streamed body (``data`` must not be empty)."""
        if not self.closed and self.transport is not None:
            self.transport.write(b"%x\r\n%b\r\n" % (len(data), data))

    def end_stream(self, last: bytes = b"") -> None:
        """Ends the streamed body, with ``last`` as its final piece if given."""
        if self.closed or self.transport is None:
            return
        if last:
            self.transport.write(b"%x\r\n%b\r\n0\r\n\r\n" % (len(last), last))
        else:
            self.transport.write(CHUNKED_END)
        self._done()

    def switch_protocols(self, headers: list[tuple[str, str]], on_data: Callable[[bytes], None]) -> None:
        """Answers an ``Upgrade`` request with 101; from then on every byte received goes to ``on_data``
        and the caller writes to ``transport`` itself (e.g. WebSocket frames)."""
        if self.closed or self.transport is None:
            return
        lines = ["HTTP/1.1 101 Switching Protocols", *(f"{k}: {v}" for k, v in headers)]
        self.transport.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        self.upgraded = on_data

    def close(self) -> None:
        """Closes once what was written has been sent."""
        if self.transport is not None and not self.closed:
            self.transport.close()

    def abort(self) -> None:
        """Drops the connection now, unsent bytes and all (a simulated crash or cut)."""
        if self.transport is not None and not self.closed:
            self.transport.abort()

    def _fail(self, status: int, message: bytes) -> None:
        if self.transport is not None and not self.closed:
            self._keep_alive = False
            self.transport.write(
                self._head(status, [("content-type", "text/plain")], f"content-length: {len(message)}")
                + message
            )
            self.close()
