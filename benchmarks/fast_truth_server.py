"""A truth server that reads as fast as the machine allows, for benchmarks/client_waves.py.

    python benchmarks/fast_truth_server.py --truth OUT.json [--cpu 0]

benchmarks/truth_server.py (tokenpace's ScriptedServer under uvloop) parses each request with h11
and reads a wave of 256 requests one after another in 15-22 ms, so its own lateness hides most of a
client's tail. This one is a bare ``asyncio.Protocol`` on uvloop: it looks for the end of the
headers, reads the body by Content-Length, stamps ``read`` (perf_counter_ns) the moment the last byte
is handed to it, and answers every request with the same script as the truth server (first token
50 ms after the read, then one chunk every 10 ms (``TRUTH_ITL_MS`` in the environment changes it), 64
tokens, usage, ``[DONE]``) from pre-built bytes,
stamping each chunk as it is written. The client's errors are measured against these stamps, so what
this server is late by is subtracted, not charged to the client.

Prints its port on the first line of stdout; on SIGTERM writes ``{"requests", "truth", "read"}``
(request id -> read stamp, request id -> each token chunk's write stamp) to ``--truth`` and exits.
Requests are keyed by their ``x-request-id`` header (tokenpace and benchmarks/refclients.py send one).
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from time import perf_counter_ns

import orjson
from truth_server import run, until_signalled, write_truth

TTFT_S, TOKENS = 0.050, 64
ITL_S = float(os.environ.get("TRUTH_ITL_MS", "10")) / 1e3  # the ceiling runs shorten it (client_waves.py)
MAX_HEAD = 64 * 1024  # a request head larger than this is refused (the benchmark never sends one)


def _chunk(data: bytes) -> bytes:
    event = b"data: " + data + b"\n\n"
    return b"%x\r\n" % len(event) + event + b"\r\n"


TOKEN = _chunk(orjson.dumps({"id": "x", "object": "chat.completion.chunk", "choices": [
    {"index": 0, "delta": {"content": " tok"}, "finish_reason": None}]}))  # fmt: skip
LAST = _chunk(orjson.dumps({"id": "x", "object": "chat.completion.chunk", "choices": [
    {"index": 0, "delta": {}, "finish_reason": "length"}]}))  # fmt: skip
USAGE = _chunk(orjson.dumps({"id": "x", "object": "chat.completion.chunk", "choices": [],
    "usage": {"prompt_tokens": 64, "completion_tokens": TOKENS, "total_tokens": 64 + TOKENS}}))  # fmt: skip
END = _chunk(b"[DONE]") + b"0\r\n\r\n"
HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n"
    b"x-request-id: %s\r\n\r\n"
)


def _header(head: bytes, name: bytes) -> bytes:
    """The value of header ``name`` (lower case) in a request head whose lines end in CRLF."""
    at = head.lower().find(b"\r\n" + name + b":")
    if at < 0:
        return b""
    start = at + len(name) + 3
    return head[start : head.find(b"\r\n", start)].strip()


class Truth:
    def __init__(self) -> None:
        self.requests = 0
        self.truth: dict[str, list[int]] = {}
        self.read: dict[str, int] = {}


class Answer(asyncio.Protocol):
    """One connection: requests one after another (keep-alive), each answered on the script."""

    def __init__(self, stats: Truth) -> None:
        self.stats = stats
        self.buf = b""
        self.transport: asyncio.Transport | None = None
        self.loop = asyncio.get_running_loop()
        self.handle: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        if self.handle is not None:
            self.handle.cancel()

    def data_received(self, data: bytes) -> None:
        read_ns = perf_counter_ns()
        self.buf += data
        end = self.buf.find(b"\r\n\r\n")
        if end < 0:
            if len(self.buf) > MAX_HEAD and self.transport is not None:
                self.transport.close()
            return
        head = self.buf[: end + 2]
        length = int(_header(head, b"content-length") or 0)
        if len(self.buf) < end + 4 + length:
            return
        self.buf = self.buf[end + 4 + length :]
        self._answer(_header(head, b"x-request-id").decode("latin-1"), read_ns)

    def _answer(self, rid: str, read_ns: int) -> None:
        self.stats.requests += 1
        self.stats.read[rid] = read_ns
        stamps = self.stats.truth.setdefault(rid, [])
        assert self.transport is not None
        self.transport.write(HEAD % rid.encode("latin-1"))
        start = self.loop.time() + TTFT_S - (perf_counter_ns() - read_ns) / 1e9
        self.handle = self.loop.call_at(start, self._emit, 0, start, stamps)

    def _emit(self, i: int, due: float, stamps: list[int]) -> None:
        t = self.transport
        if t is None or t.is_closing():
            return
        if i < TOKENS:
            t.write(TOKEN)
            stamps.append(perf_counter_ns())
            self.handle = self.loop.call_at(due + ITL_S, self._emit, i + 1, due + ITL_S, stamps)
            return
        t.write(LAST + USAGE + END)
        self.handle = None


async def serve(truth_path: Path) -> None:
    stats = Truth()
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: Answer(stats), "127.0.0.1", 0, backlog=4096)
    await until_signalled(server.sockets[0].getsockname()[1])
    server.close()
    write_truth(truth_path, stats.requests, stats.truth, stats.read)


if __name__ == "__main__":
    run(serve, __doc__)
