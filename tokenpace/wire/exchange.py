"""One request and its response on a keep-alive connection, for every user of the wire.

The HTTP/1.1 kernel's events (tokenpace.wire.http1.client) become a response head (status,
headers, framing), body pieces handed to a ``Reader`` inside ``data_received`` (timestamped on
arrival, no copy, no task switch), and an end or a failure. The benchmark client's reader measures
tokens (tokenpace.client.exchange); the gateway's relay meters and forwards. ``head`` and ``done``
are futures for whoever waits (the gateway waits for the head, the client only for the end).
``unanswered`` tells the one resend rule (tokenpace.wire.pool) that the connection closed before
any response came.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol

LOST_BEFORE_HEAD = "connection closed before the response headers"
LOST_MID_BODY = "connection closed mid-stream"


class ExchangeError(Exception):
    """The response could not be read whole; ``mid_body``: its head had arrived."""

    def __init__(self, message: str, mid_body: bool) -> None:
        super().__init__(message)
        self.mid_body = mid_body


class Reader(Protocol):
    """Whoever reads the response; ``now`` is when the bytes carrying the event arrived."""

    def on_head(self, ex: Exchange, now: int) -> None: ...

    def on_body(self, data: bytes, now: int) -> None: ...

    def on_end(self, now: int) -> None: ...

    def on_failed(self, reason: str, now: int, lost: bool) -> None:
        """``lost``: the connection ended first (else the response was malformed)."""


class BodyReader:
    """A ``Reader`` for callers that awaited the head already and await ``done`` for the end: only
    ``on_body`` (its subclass's) does anything."""

    __slots__ = ()

    def on_head(self, ex: Exchange, now: int) -> None:
        pass

    def on_end(self, now: int) -> None:
        pass

    def on_failed(self, reason: str, now: int, lost: bool) -> None:
        pass


class Exchange:
    __slots__ = (
        "chunked",
        "content_type",
        "done",
        "encoding",
        "finishing",
        "head",
        "headers",
        "length",
        "on_body",
        "pending",
        "reader",
        "status",
        "unanswered",
    )

    def __init__(self, loop: asyncio.AbstractEventLoop, reader: Reader | None = None) -> None:
        self.head: asyncio.Future[None] = loop.create_future()  # the final response's head arrived
        self.done: asyncio.Future[None] = loop.create_future()  # over: ended, failed or given up
        self.reader = reader
        # Where body pieces go: the reader's on_body, unless the reader routes them elsewhere (the
        # client's reader sends a compressed body through its inflater first).
        self.on_body: Callable[[bytes, int], None] | None = None if reader is None else reader.on_body
        self.status = 0
        self.headers: list[tuple[bytes, bytes]] = []  # bounded by the kernel's head cap (64 KiB)
        self.content_type = b""
        self.encoding = b""  # Content-Encoding, lower-cased
        self.length: int | None = None
        self.chunked = False
        self.unanswered = False  # the connection closed before any response came
        # The reader still reads the body after its last byte came (a compressed body inflated a
        # slice per turn): the end is the reader's to call (it sets ``done`` itself).
        self.finishing = False
        # Body that came before a reader was attached (the gateway attaches after sending the head).
        self.pending: list[tuple[bytes, int]] = []

    def attach(self, reader: Reader) -> None:
        """From now on body pieces go to ``reader`` as they arrive; earlier ones are replayed."""
        pending, self.pending = self.pending, []
        self.reader, self.on_body = reader, reader.on_body
        for data, now in pending:
            reader.on_body(data, now)

    # --- tokenpace.wire.http1.client.ResponseHandler ---
    def response_header(self, name: bytes, low_name: bytes, value: bytes) -> None:
        self.headers.append((name, value))
        if low_name == b"content-type":
            self.content_type = value
        elif low_name == b"content-encoding":
            self.encoding = value.strip().lower()
        elif low_name == b"content-length":
            self.length = int(value) if value.strip().isdigit() else None
        elif low_name == b"transfer-encoding" and b"chunked" in value.lower():
            self.chunked = True

    def response_interim(self) -> None:
        self.headers.clear()  # a 1xx's; the real response follows with its own
        self.content_type = self.encoding = b""
        self.length, self.chunked = None, False

    def response_head(self, status: int, now: int) -> None:
        self.status = status
        if self.reader is not None:
            self.reader.on_head(self, now)
        if not self.head.done():
            self.head.set_result(None)

    def response_body(self, data: bytes, now: int) -> None:
        on_body = self.on_body
        if on_body is not None:
            on_body(data, now)
        else:
            self.pending.append((data, now))

    def response_end(self, now: int) -> None:
        if self.reader is not None:
            self.reader.on_end(now)
        if not self.done.done() and not self.finishing:
            self.done.set_result(None)

    def response_lost(self, exc: Exception | None, now: int, body_ended: bool) -> None:
        if body_ended:
            self.response_end(now)  # a body delimited by the close (HTTP/1.0 style): complete
            return
        self.unanswered = not self.head.done()
        reason = LOST_BEFORE_HEAD if self.unanswered else LOST_MID_BODY
        self.fail(reason + (f" ({exc})" if exc is not None else ""), now, lost=True)

    def response_malformed(self, reason: str, now: int) -> None:
        self.fail(reason, now, lost=False)

    # --- ours ---
    def fail(self, reason: str, now: int, lost: bool) -> None:
        if self.reader is not None:
            self.reader.on_failed(reason, now, lost)
        mid = self.head.done()
        if not mid:
            self.head.set_exception(ExchangeError(reason, False))
            self.head.exception()  # retrieved here: the waiter may be gone
        if not self.done.done() and not self.finishing:
            self.done.set_exception(ExchangeError(reason, mid))
            self.done.exception()

    def give_up(self) -> None:
        """The reader is done with it (a timeout, a broken stream): whoever waits stops waiting."""
        if not self.done.done():
            self.done.set_result(None)
