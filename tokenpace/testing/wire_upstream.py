"""A raw OpenAI-style upstream on 127.0.0.1 for the wire's hostile cases, one behaviour per model
name, counting the requests it read (per model): what a client or the gateway sent, exactly.

healthy      a short SSE stream (keep-alive)
gzip         the same stream, gzip-compressed
bomb-sse     gzip that inflates to BOMB_BYTES of SSE comment events (no token, no end)
bomb-json    gzip that inflates to BOMB_BYTES of one JSON document
read-drop    answered on a new connection; on a reused one, read and dropped unanswered
late-close   the stream chunked, then the connection closed LATE_CLOSE_S later without reading on
             (llama.cpp's server closes after each streamed response; a proxy passes it on late)

``ClosingRace``: a server that closes an idle connection just as a pool reuses it.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
import zlib
from collections import Counter
from functools import cache

import orjson

from tokenpace.wire.liveness import acked_bytes

STREAM = (
    b'data: {"choices":[{"index":0,"delta":{"content":"a"}}]}\n\n'
    b'data: {"choices":[{"index":0,"delta":{"content":"b"},"finish_reason":"stop"}]}\n\n'
    b"data: [DONE]\n\n"
)
LATE_CLOSE_S = 0.005
BOMB_BYTES = 128 * 1024 * 1024  # past every cap on an inflated body (tokenpace.wire.inflate)
BOMBS = frozenset({"bomb-sse", "bomb-json"})


@cache
def gzip_of_repeated(piece: bytes, total: int, head: bytes = b"") -> bytes:
    """gzip of ``head`` then ``piece`` repeated to ``total`` bytes (a compression bomb)."""
    z = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = piece * (1024 * 1024 // len(piece))
    out = [z.compress(head)]
    for _ in range(total // len(block)):
        out.append(z.compress(block))
    out.append(z.flush())
    return b"".join(out)


def _gzip(data: bytes) -> bytes:
    z = zlib.compressobj(6, zlib.DEFLATED, 31)
    return z.compress(data) + z.flush()


def _response(content_type: bytes, body: bytes, encoding: bytes = b"") -> bytes:
    head = b"HTTP/1.1 200 OK\r\nContent-Type: %b\r\nContent-Length: %d\r\n" % (content_type, len(body))
    if encoding:
        head += b"Content-Encoding: %b\r\n" % encoding
    return head + b"\r\n" + body


def answer(model: str) -> bytes:
    sse = b"text/event-stream"
    if model == "late-close":
        head = b"HTTP/1.1 200 OK\r\nContent-Type: %b\r\nTransfer-Encoding: chunked\r\n\r\n" % sse
        return head + b"%x\r\n%b\r\n0\r\n\r\n" % (len(STREAM), STREAM)
    if model == "gzip":
        return _response(sse, _gzip(STREAM), b"gzip")
    if model == "bomb-sse":
        return _response(sse, gzip_of_repeated(b": " + b"x" * 1020 + b"\n\n", BOMB_BYTES), b"gzip")
    if model == "bomb-json":
        json = b"application/json"
        return _response(json, gzip_of_repeated(b"a" * 1024, BOMB_BYTES, b'{"pad":"'), b"gzip")
    return _response(sse, STREAM)


class WireUpstream:
    def __init__(self) -> None:
        self.read: Counter[str] = Counter()  # requests read, per model
        self.connections = 0
        self._server: asyncio.AbstractServer | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def __aenter__(self) -> WireUpstream:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        served = 0
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                body = orjson.loads(await reader.readexactly(length)) if length else {}
                model = str(body.get("model", "healthy"))
                self.read[model] += 1
                if model == "read-drop" and served:
                    writer.transport.abort()  # read, then dropped without an answer
                    return
                # a bomb takes seconds of CPU to build the first time: built on a thread, as this
                # server shares its event loop with the client or gateway under test
                writer.write(await asyncio.to_thread(answer, model) if model in BOMBS else answer(model))
                await writer.drain()
                served += 1
                if model == "late-close":
                    await asyncio.sleep(LATE_CLOSE_S)
                    break
        writer.close()


class ClosingRace:
    """A server (a thread, plain sockets) that answers one request per connection, and closes its
    first connection in the instant between a pool's look at it (``look``, patched over
    ``tokenpace.wire.pool.look_before_send``) and the write of the next request: a race no check can
    close, and a request the server's TCP never acknowledges. ``posts``: request heads read."""

    def __init__(self) -> None:
        self._srv = socket.socket()
        self._srv.bind(("127.0.0.1", 0))
        self._srv.listen()
        self._close_now, self._closed = threading.Event(), threading.Event()
        self.posts: list[bytes] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._srv.getsockname()[1]}/v1"

    def __enter__(self) -> ClosingRace:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._thread.join(10)
        self._srv.close()

    def _serve(self) -> None:
        reply = _response(b"text/event-stream", STREAM)
        for _ in range(2):
            conn, _ = self._srv.accept()
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            self.posts.append(data.split(b"\r\n", 1)[0])
            conn.sendall(reply)
            if len(self.posts) == 1:
                self._close_now.wait(10)  # the pool is about to reuse this connection: close it now
            conn.close()
            self._closed.set()

    def look(self, transport: asyncio.BaseTransport | None) -> tuple[bool, int | None]:
        """The pool's look at the idle connection: still open (with what its TCP had acknowledged
        so far)... and closed right after."""
        acked = acked_bytes(transport)
        self._close_now.set()
        self._closed.wait(10)
        time.sleep(0.05)  # the server's FIN is on the wire before the request goes out
        return False, acked
