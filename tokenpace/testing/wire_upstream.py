"""A raw OpenAI-style upstream on 127.0.0.1 for the wire's hostile cases, one behaviour per model
name, counting the requests it read (per model): what a client or the gateway sent, exactly.

healthy      a short SSE stream (keep-alive)
gzip         the same stream, gzip-compressed
bomb-sse     gzip that inflates to BOMB_BYTES of SSE comment events (no token, no end)
bomb-json    gzip that inflates to BOMB_BYTES of one JSON document
read-drop    answered on a new connection; on a reused one, read and dropped unanswered
"""

from __future__ import annotations

import asyncio
import contextlib
import zlib
from collections import Counter
from functools import cache

import orjson

STREAM = (
    b'data: {"choices":[{"index":0,"delta":{"content":"a"}}]}\n\n'
    b'data: {"choices":[{"index":0,"delta":{"content":"b"},"finish_reason":"stop"}]}\n\n'
    b"data: [DONE]\n\n"
)
BOMB_BYTES = 128 * 1024 * 1024  # past every cap on an inflated body (tokenpace.wire.inflate)


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
                writer.write(answer(model))
                await writer.drain()
                served += 1
        writer.close()
