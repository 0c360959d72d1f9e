"""A misbehaving OpenAI-style upstream on 127.0.0.1 (raw asyncio), one behaviour per model name.

healthy    a fixed stream (so proxied bytes can be compared byte for byte)
endless    SSE bytes without a blank line, as fast as the reader takes them (bounded at 64 MiB)
drip       one token, then an event that never ends: one byte every 20 ms (bounded at 20 s)
drip0      the same from the start, before any token
huge       one complete 2 MiB event
odd-N      one odd-shaped chunk (ODD[N]) between healthy ones; the stream then ends normally
malformed  a broken JSON chunk between healthy ones; the stream then ends normally with [DONE]
reset      two tokens, then a TCP reset
endless-head  response headers that never end
flood      FLOOD_TOKENS tiny token events in 56 KiB writes (past the kept-timestamp cap), then [DONE]
plain-*    the healthy stream (a name of the test's own to find its records by)
echo-auth  one token, then an error event echoing its Authorization, Basic decoded
echo-keys  one token, then an error event echoing the bare token of its Authorization (no scheme)
           and its x-api-key and api-key values
big        BIG_BYTES of token events as fast as the reader takes them, then [DONE]
liar       the healthy stream, but its usage claims LIAR_TOKENS output tokens

``GET .../models`` lists LISTED_MODELS (what the gateway asks once half its model label slots are taken).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import socket
import struct

import orjson

HEALTHY = [
    b'data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}\r\n\r\n',
    b'data: {"choices":[{"index":0,"delta":{"content":"Hel',
    b'lo"}}]}\n\ndata: {"choices":[{"index":0,"delta":{"content":" there"}}]}\n\n',
    b'data: {"choices":[{"index":0,"delta":{"content":"!"},"finish_reason":"stop"}]}\n\n',
    b'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":3,"total_tokens":6}}\n\n',
    b"data: [DONE]\n\n",
]
TOKEN = b'data: {"choices":[{"index":0,"delta":{"content":"tok"}}]}\n\n'
FLOOD_TOKENS = 20_000
BIG_BYTES = 8 * 1024 * 1024
BIG_TOKEN = TOKEN.replace(b'"tok"', b'"' + b"t" * 4000 + b'"')
LIAR_TOKENS = 10**12
LISTED_MODELS = ("healthy", "plain-listed")
_LISTING = orjson.dumps({"object": "list", "data": [{"id": m, "object": "model"} for m in LISTED_MODELS]})
_LISTING_ANSWER = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%b" % (
    len(_LISTING),
    _LISTING,
)
_LIAR_USAGE = b'"completion_tokens":%d' % LIAR_TOKENS
LIAR = [*HEALTHY[:4], HEALTHY[4].replace(b'"completion_tokens":3', _LIAR_USAGE), HEALTHY[5]]
ODD = [
    b'{"choices":5}',
    b"[null]",
    b'{"delta":"x"}',
    b'{"choices":[{"delta":"x"}]}',
    b'{"choices":[null]}',
    b'{"usage":5}',
    b'{"choices":[{"delta":{"content":"a"},"finish_reason":7}],"usage":{"prompt_tokens":"3"}}',
]


def odd_stream(n: int) -> list[bytes]:
    return [HEALTHY[0], TOKEN, b"data: " + ODD[n] + b"\n\n", *HEALTHY[3:]]


MALFORMED = [HEALTHY[0], TOKEN, b'data: {"choices": [ broken\n\n', TOKEN, *HEALTHY[3:]]


_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%b\r\n" % (len(data), data)


def _echo_keys(head: bytes) -> bytes:
    """An error event that repeats every credential value the request carried, without schemes."""
    seen = []
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        low, value = name.strip().lower(), value.strip()
        if low == b"authorization":
            seen.append(value.partition(b" ")[2] or value)
        elif low in (b"x-api-key", b"api-key"):
            seen.append(value)
    message = orjson.dumps({"error": {"message": "bad keys " + b" ".join(seen).decode(errors="replace")}})
    return b"data: " + message + b"\n\n"


def _echo_auth(head: bytes) -> bytes:
    """An error event that repeats the request's credentials, as a careless upstream might."""
    auth = b""
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"authorization:"):
            auth = line.split(b":", 1)[1].strip()
    if auth.lower().startswith(b"basic "):
        auth = base64.b64decode(auth[6:])
    message = orjson.dumps({"error": {"message": "rejected credentials " + auth.decode(errors="replace")}})
    return b"data: " + message + b"\n\n"


class HostileUpstream:
    def __init__(self) -> None:
        self.server: asyncio.AbstractServer | None = None
        self.port = 0
        self.seen_models: list[str] = []
        self.seen_heads: list[bytes] = []  # each request head as it arrived

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def __aenter__(self) -> HostileUpstream:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # CancelledError too: at the end of a test its loop cancels what still plays
        with contextlib.suppress(
            ConnectionError, asyncio.IncompleteReadError, OSError, asyncio.CancelledError
        ):
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                self.seen_heads.append(head)
                line = head[: head.find(b"\r\n")]
                if line.startswith(b"GET ") and b"/models " in line:
                    writer.write(_LISTING_ANSWER)
                    await writer.drain()
                    continue
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                body = orjson.loads(await reader.readexactly(length)) if length else {}
                model = body.get("model", "healthy")
                self.seen_models.append(model)
                if model == "endless-head":  # headers that never end: 1 MiB of them
                    writer.write(b"HTTP/1.1 200 OK\r\n" + b"X-Pad: yyyyyyyyyyyyyyyy\r\n" * 40000)
                    await writer.drain()
                    await asyncio.sleep(5)
                    return
                writer.write(_HEAD)
                if model in ("echo-auth", "echo-keys"):
                    echo = _echo_auth(head) if model == "echo-auth" else _echo_keys(head)
                    writer.write(_chunk(HEALTHY[0]) + _chunk(TOKEN) + _chunk(echo))
                    writer.write(b"0\r\n\r\n")
                    await writer.drain()
                    continue
                if not await self._play(model, writer):
                    return
                writer.write(b"0\r\n\r\n")
                await writer.drain()
        writer.close()

    async def _play(self, model: str, writer: asyncio.StreamWriter) -> bool:
        """Writes the body; False when the connection must not be reused."""
        if model.startswith("odd-"):
            pieces = odd_stream(int(model[4:]))
        else:
            pieces = {"healthy": HEALTHY, "malformed": MALFORMED, "liar": LIAR}.get(model, [])
            pieces = HEALTHY if model.startswith("plain-") else pieces
        if pieces:
            for piece in pieces:
                writer.write(_chunk(piece))
                await writer.drain()
                await asyncio.sleep(0.005)
            return True
        if model == "flood":
            writer.write(_chunk(HEALTHY[0]))
            batch = _chunk(TOKEN * 1000)
            for _ in range(FLOOD_TOKENS // 1000):
                writer.write(batch)
                await writer.drain()
            writer.write(_chunk(HEALTHY[3]) + _chunk(HEALTHY[5]))
            return True
        if model == "big":  # big events: cheap to meter, many bytes
            writer.write(_chunk(HEALTHY[0]))
            batch = _chunk(BIG_TOKEN * 16)
            for _ in range(BIG_BYTES // (len(BIG_TOKEN) * 16)):
                writer.write(batch)
                await writer.drain()
            writer.write(_chunk(HEALTHY[3]) + _chunk(HEALTHY[5]))
            return True
        if model == "endless":
            line = _chunk(b"data: " + b"x" * 65536)
            for _ in range(1024):
                writer.write(line)
                await writer.drain()
        elif model == "huge":
            writer.write(_chunk(b"data: " + b"y" * (2 * 1024 * 1024) + b"\n\n"))
            await writer.drain()
            await asyncio.sleep(5)
        elif model in ("drip", "drip0"):
            if model == "drip":
                writer.write(_chunk(HEALTHY[0]) + _chunk(TOKEN))
            writer.write(_chunk(b'data: {"choices":'))
            for _ in range(1000):
                await asyncio.sleep(0.02)
                writer.write(_chunk(b" "))
                await writer.drain()
        elif model == "reset":
            writer.write(_chunk(HEALTHY[0]) + _chunk(TOKEN) + _chunk(TOKEN))
            await writer.drain()
            await asyncio.sleep(0.05)
            sock = writer.get_extra_info("socket")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()
        return False
