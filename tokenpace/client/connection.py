"""One keep-alive HTTP/1.1 connection: timestamps bytes as they arrive, parses with httptools.

The timestamp is taken first thing in ``data_received``, before any parsing or JSON decoding, so
what tokenpace reports is when the bytes reached the process, not when it got round to them.
"""

from __future__ import annotations

import asyncio
from time import perf_counter_ns
from typing import TYPE_CHECKING

import httptools

if TYPE_CHECKING:
    from tokenpace.client.exchange import Exchange


class HttpConnection(asyncio.Protocol):
    __slots__ = ("closed", "exchange", "keep_alive", "now", "parser", "transport")

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.exchange: Exchange | None = None
        self.now = 0
        self.keep_alive = True
        self.closed = False

    # --- asyncio.Protocol ---
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.now = perf_counter_ns()
        ex = self.exchange  # kept: a callback may have cleared self.exchange before it raised
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self.keep_alive = False
            if ex is not None:
                cause = exc.__cause__ or exc.__context__
                what = f"unexpected response: {cause}" if cause else f"malformed HTTP response: {exc}"
                ex.protocol_error(what, self.now)
            self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        ex = self.exchange
        if ex is not None:
            self.exchange = None
            ex.connection_lost(exc, perf_counter_ns())

    # --- httptools callbacks ---
    def on_header(self, name: bytes, value: bytes) -> None:
        ex = self.exchange
        if ex is not None:
            name = name.lower()
            if name == b"content-type":
                ex.content_type = value
            elif name in (b"content-length", b"transfer-encoding"):
                ex.framed = True  # else the body ends when the server closes the connection

    def on_headers_complete(self) -> None:
        self.keep_alive = self.parser.should_keep_alive()
        if self.exchange is not None:
            self.exchange.headers(self.parser.get_status_code(), self.now)

    def on_body(self, body: bytes) -> None:
        if self.exchange is not None:
            self.exchange.body(body, self.now)

    def on_message_complete(self) -> None:
        ex = self.exchange
        self.exchange = None
        if ex is not None:
            ex.complete(self.now)

    # --- ours ---
    @property
    def reusable(self) -> bool:
        return not self.closed and self.keep_alive and self.exchange is None

    def start(self, exchange: Exchange, payload: bytes) -> None:
        self.exchange = exchange
        self.transport.write(payload)  # type: ignore[union-attr]

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.abort()  # no graceful close: the request is over either way
