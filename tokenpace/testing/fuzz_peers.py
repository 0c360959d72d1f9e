"""Hostile upstream peers for the gateway's fuzzer (tests/gateway/operations/test_gateway_fuzz.py)
and its long run (benchmarks/gateway_fuzz.py): a peer is a ``Peer`` (what it streams and how it
cuts it), played by ``FuzzUpstream`` on 127.0.0.1, one behaviour per model name.

A peer's stream is SSE token events, optionally opened with a UTF-8 BOM, with CR, LF or CRLF line
ends, a flood of comment lines before its first event, events padded to random sizes, gzip'd as a
whole (with bytes after the end of the gzip data, if asked), then written in HTTP chunks of the
sizes the peer lists (down to one byte each), and cut (the connection closed) after a number of
bytes, or ended normally. Nothing here draws at random:
the fuzzer (hypothesis) draws the peers, so a finding is replayed from its ``Peer`` alone.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import zlib
from dataclasses import dataclass

import orjson

BOM = b"\xef\xbb\xbf"
MAX_PEER_BYTES = 4 * 1024 * 1024  # what one peer may stream in all (its body before chunking)
HEALTHY_MODEL = "healthy"


@dataclass(frozen=True)
class Peer:
    tokens: int = 3  # token events before [DONE]
    pad: int = 0  # bytes of padding in each token's text
    bom: bool = False
    line_end: bytes = b"\n"  # b"\n", b"\r\n" or b"\r"
    comments: int = 0  # comment lines before the first event (a keep-alive flood)
    gzip: bool = False
    chunks: tuple[int, ...] = (65536,)  # HTTP chunk sizes, used in turn (1: a byte per chunk)
    cut_after: int | None = None  # close after this many body bytes (None: end normally)
    trailing: int = 0  # bytes after the end of the gzip data (a body the inflater must refuse)

    def body(self) -> bytes:
        """The response body before chunking: SSE events, possibly gzip'd; built in one buffer and
        stopped at ``MAX_PEER_BYTES`` (the fuzzer's own memory must not hide the peer's cost)."""
        end = self.line_end
        out = bytearray(BOM if self.bom else b"")
        out += (b": keep-alive" + end) * self.comments
        text = "t" * self.pad
        chunk = orjson.dumps({"choices": [{"index": 0, "delta": {"content": text or "x"}}]})
        event = b"data: " + chunk + end + end  # every token event is the same
        for _ in range(self.tokens):
            if len(out) >= MAX_PEER_BYTES:
                break
            out += event
        out += b"data: [DONE]" + end + end
        body = bytes(out[:MAX_PEER_BYTES])
        if self.gzip:
            z = zlib.compressobj(6, zlib.DEFLATED, 31)
            body = z.compress(body) + z.flush() + b"\0" * self.trailing
        return body

    def wire(self) -> bytes:
        """The whole response as written: head, then the body in HTTP chunks (cut if asked)."""
        head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
        head += b"Content-Encoding: gzip\r\n\r\n" if self.gzip else b"\r\n"
        body = self.body()
        if self.cut_after is not None:
            body = body[: self.cut_after]
        out, i, k = bytearray(head), 0, 0  # one buffer: a list of 4 M one-byte chunks would be 200 MB
        sizes = self.chunks or (65536,)
        while i < len(body):
            n = max(1, sizes[k % len(sizes)])
            piece = body[i : i + n]
            out += b"%x\r\n%b\r\n" % (len(piece), piece)
            i, k = i + n, k + 1
        if self.cut_after is None:
            out += b"0\r\n\r\n"
        return bytes(out)

    @property
    def ends_well(self) -> bool:
        return self.cut_after is None

    @property
    def past_the_end(self) -> bool:
        """Bytes follow the end of its compressed data on the wire (the body is refused)."""
        if not (self.gzip and self.trailing):
            return False
        return self.cut_after is None or self.cut_after > len(self.body()) - self.trailing


HEALTHY = Peer(tokens=5)


WIRE_CACHE_BYTES = 16 * 1024 * 1024  # a peer's bytes kept for its next request (tests' peers are small)


class FuzzUpstream:
    """Plays ``peers[model]`` to each request (``HEALTHY`` for the healthy model), one request per
    connection; the connection closes when the peer is done (so a cut peer is a mid-stream close).

    A peer's bytes are built once and kept (up to ``cache_bytes`` in all, then the cache starts
    again): building 4 MiB of events and gzip'ing them takes ~20 ms of this process's loop, which
    would otherwise stall the healthy streams it serves and be blamed on the gateway."""

    def __init__(self, cache_bytes: int = WIRE_CACHE_BYTES) -> None:
        self.peers: dict[str, Peer] = {HEALTHY_MODEL: HEALTHY}
        self.cache_bytes = cache_bytes
        self._wires: dict[Peer, bytes] = {}
        self._cached = 0
        self.server: asyncio.AbstractServer | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def __aenter__(self) -> FuzzUpstream:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.server is not None:
            self.server.close()

    def wire(self, peer: Peer) -> bytes:
        """The peer's whole response as written, built once while the cache holds it."""
        wire = self._wires.get(peer)
        if wire is None:
            wire = peer.wire()
            if self._cached + len(wire) > self.cache_bytes:
                self._wires.clear()
                self._cached = 0
            self._wires[peer] = wire
            self._cached += len(wire)
        return wire

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(Exception):
            head = await reader.readuntil(b"\r\n\r\n")
            if b"upgrade: websocket" in head.lower():
                await ws_session(head, reader, writer, flood=b"flood=upstream" in head.split(b"\r\n", 1)[0])
                return
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":", 1)[1])
            body = orjson.loads(await reader.readexactly(length)) if length else {}
            peer = self.peers.get(str(body.get("model", "")), HEALTHY)
            wire = self.wire(peer)
            for i in range(0, len(wire), 64 * 1024):  # as fast as the reader takes it
                writer.write(wire[i : i + 64 * 1024])
                await writer.drain()
        with contextlib.suppress(Exception):
            writer.close()


PING_BLOCK = b"\x89\x00" * 32768  # 64 KiB of empty pings, unmasked (a server's)
MASKED_PING_BLOCK = b"\x89\x80\x00\x00\x00\x00" * 10922  # ~64 KiB of empty pings, masked (a client's)


def ws_handshake(head: bytes) -> bytes:
    """The 101 answer to a WebSocket upgrade request's head."""
    key = next(
        line.split(b":", 1)[1].strip()
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"sec-websocket-key:")
    )
    accept = base64.b64encode(hashlib.sha1(key + b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest())
    return (
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        b"Sec-WebSocket-Accept: " + accept + b"\r\n\r\n"
    )


async def ws_session(
    head: bytes, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, flood: bool
) -> None:
    """A WebSocket upstream: with ``flood``, empty pings as fast as the reader takes them (a ping
    flood from the upstream's side); else what the client sends is read and dropped."""
    writer.write(ws_handshake(head))
    if flood:
        while not reader.at_eof():
            writer.write(PING_BLOCK)
            await writer.drain()
    else:
        while await reader.read(65536):
            pass
    writer.close()
