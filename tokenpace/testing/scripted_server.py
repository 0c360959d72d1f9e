"""A scripted OpenAI-compatible server whose timing and failures are known in advance.

Each request's behaviour comes from a ``Script`` chosen by the request's model name (falling back
to the default script), so one server can play every failure a test needs. Every streamed chunk
carries ``tp_server_ns``, the server's ``perf_counter_ns()`` when it wrote the chunk: on one
machine that is the same clock as the client's, which makes the client's timing error measurable.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from dataclasses import dataclass, field
from time import perf_counter_ns

import httptools
import orjson


@dataclass(frozen=True, slots=True)
class Script:
    ttft_s: float = 0.05  # first token this long after the request was read
    itl_s: float = 0.01  # then one chunk every itl_s
    tokens: int | None = None  # chunks to send (None: the request's max_tokens)
    tokens_per_chunk: int = 1
    role_chunk: bool = True  # a role-only first chunk, as real engines send
    null_first_content: bool = False  # a first chunk with "content": null (llama.cpp does this)
    reasoning_chunks: int = 0  # this many reasoning_content chunks before the answer
    usage: bool = True  # honour stream_options.include_usage
    continuous_usage: bool = False  # usage in every chunk (vLLM continuous_usage_stats)
    http_status: int | None = None  # answer with this error status instead
    retry_after: int | None = None
    close_before_headers: bool = False
    cut_after: int | None = None  # drop the connection after this many token chunks
    malformed_after: int | None = None  # send a broken JSON chunk after this many
    error_event_after: int | None = None  # send an {"error": ...} chunk after this many
    stall_after: int | None = None  # stop sending (connection left open) after this many
    send_done: bool = True
    crlf: bool = False  # CRLF line ends in the SSE stream
    comments: bool = False  # ": keep-alive" comment lines between events
    split_events: bool = False  # each event written in two pieces


@dataclass
class ServerStats:
    requests: int = 0
    truth: dict[str, list[int]] = field(default_factory=dict)  # request id -> chunk send times


class _Connection(asyncio.Protocol):
    def __init__(self, server: ScriptedServer) -> None:
        self.server = server
        self.parser = httptools.HttpRequestParser(self)
        self.transport: asyncio.Transport | None = None
        self.url = b""
        self.headers: dict[bytes, bytes] = {}
        self.body = bytearray()
        self.handles: list[asyncio.TimerHandle] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.server.connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        for h in self.handles:
            h.cancel()
        self.server.connections.discard(self)

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            self._respond(400, {"error": {"message": "bad request", "type": "invalid_request"}})

    def on_message_begin(self) -> None:
        self.url = b""
        self.headers = {}
        self.body = bytearray()

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers[name.lower()] = value

    def on_body(self, body: bytes) -> None:
        self.body += body

    def on_message_complete(self) -> None:
        read_ns = perf_counter_ns()
        self.server.stats.requests += 1
        path = self.url.split(b"?")[0]
        if path.endswith(b"/models"):
            self._respond(200, {"object": "list", "data": [{"id": "scripted", "object": "model"}]})
            return
        try:
            req = orjson.loads(self.body)
        except orjson.JSONDecodeError:
            self._respond(400, {"error": {"message": "bad json", "type": "invalid_request"}})
            return
        chat = path.endswith(b"/chat/completions")
        script = self.server.scripts.get(req.get("model", ""), self.server.default)
        self._serve(req, script, chat, read_ns)

    # --- responses ---
    def _respond(self, status: int, payload: dict, extra: str = "") -> None:
        body = orjson.dumps(payload)
        head = (
            f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n{extra}\r\n"
        )
        self.transport.write(head.encode() + body)  # type: ignore[union-attr]

    def _serve(self, req: dict, script: Script, chat: bool, read_ns: int) -> None:
        rid = self.headers.get(b"x-request-id", b"").decode()
        if script.close_before_headers:
            self.transport.abort()  # type: ignore[union-attr]
            return
        if script.http_status:
            extra = f"Retry-After: {script.retry_after}\r\n" if script.retry_after else ""
            self._respond(
                script.http_status,
                {
                    "error": {
                        "message": f"scripted {script.http_status}",
                        "type": "scripted",
                        "code": script.http_status,
                    }
                },
                extra,
            )
            return
        n = script.tokens if script.tokens is not None else int(req.get("max_tokens") or 16)
        prompt_tokens = _prompt_words(req)
        if not req.get("stream"):
            self._full(req, script, chat, n, prompt_tokens, read_ns)
            return
        head = (
            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
            f"x-request-id: {rid}\r\n\r\n"
        )
        self.transport.write(head.encode())  # type: ignore[union-attr]
        stream = _Stream(
            self,
            script,
            chat,
            n,
            prompt_tokens,
            rid,
            bool((req.get("stream_options") or {}).get("include_usage")),
        )
        loop = asyncio.get_running_loop()
        start = loop.time() + (read_ns / 1e9 - _perf_s()) + script.ttft_s
        self.handles.append(loop.call_at(start, stream.emit, 0, start))

    def _full(self, req: dict, script: Script, chat: bool, n: int, prompt_tokens: int, read_ns: int) -> None:
        text = " tok" * n * script.tokens_per_chunk
        choice = (
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "length"}
            if chat
            else {"index": 0, "text": text, "finish_reason": "length"}
        )
        payload = {
            "id": "x",
            "object": "chat.completion" if chat else "text_completion",
            "choices": [choice],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": n * script.tokens_per_chunk,
                "total_tokens": prompt_tokens + n * script.tokens_per_chunk,
            },
        }
        delay = script.ttft_s + script.itl_s * max(0, n - 1)
        loop = asyncio.get_running_loop()
        self.handles.append(loop.call_later(delay, self._respond, 200, payload))

    def write_event(self, data: bytes, script: Script) -> None:
        nl = b"\r\n" if script.crlf else b"\n"
        event = b"data: " + data + nl + nl
        if script.comments:
            event = b": keep-alive" + nl + event
        t = self.transport
        if t is None or t.is_closing():
            return
        if script.split_events:
            half = len(event) // 2
            t.write(_chunk(event[:half]))
            t.write(_chunk(event[half:]))
        else:
            t.write(_chunk(event))


class _Stream:
    """Emits one request's chunks on schedule; each emission schedules the next."""

    def __init__(
        self,
        conn: _Connection,
        script: Script,
        chat: bool,
        n: int,
        prompt_tokens: int,
        rid: str,
        include_usage: bool,
    ) -> None:
        self.conn, self.script, self.chat, self.n = conn, script, chat, n
        self.prompt_tokens, self.rid, self.include_usage = prompt_tokens, rid, include_usage
        self.truth = conn.server.stats.truth.setdefault(rid, [])

    def emit(self, i: int, due: float) -> None:
        s, conn = self.script, self.conn
        if i == 0 and s.role_chunk and self.chat:
            conn.write_event(orjson.dumps(self._chunk({"role": "assistant", "content": ""}, None)), s)
        if i == 0 and s.null_first_content and self.chat:
            conn.write_event(orjson.dumps(self._chunk({"content": None}, None)), s)
        if s.stall_after is not None and i >= s.stall_after:
            return
        if s.cut_after is not None and i >= s.cut_after:
            conn.transport.abort()  # type: ignore[union-attr]
            return
        if s.malformed_after is not None and i >= s.malformed_after:
            conn.write_event(b'{"choices": [{"delta": {"content": "x"', s)
            return
        if s.error_event_after is not None and i >= s.error_event_after:
            conn.write_event(orjson.dumps({"error": {"message": "scripted engine failure"}}), s)
            conn.transport.write(b"0\r\n\r\n")  # type: ignore[union-attr]
            return
        if i < self.n:
            word = " tok" * s.tokens_per_chunk
            reasoning = i < s.reasoning_chunks
            delta = {"reasoning_content": word} if reasoning else {"content": word}
            if not self.chat:
                delta = {"text": word}
            last = i == self.n - 1
            chunk = self._chunk(delta, "length" if last else None)
            if s.continuous_usage:
                chunk["usage"] = self._usage((i + 1) * s.tokens_per_chunk)
            self.truth.append(perf_counter_ns())
            chunk["tp_server_ns"] = self.truth[-1]
            conn.write_event(orjson.dumps(chunk), s)
            loop = asyncio.get_running_loop()
            conn.handles.append(loop.call_at(due + s.itl_s, self.emit, i + 1, due + s.itl_s))
            return
        if self.include_usage and s.usage:
            conn.write_event(
                orjson.dumps({"id": "x", "choices": [], "usage": self._usage(self.n * s.tokens_per_chunk)}), s
            )
        if s.send_done:
            conn.write_event(b"[DONE]", s)
        conn.transport.write(b"0\r\n\r\n")  # type: ignore[union-attr]

    def _chunk(self, delta: dict, finish: str | None) -> dict:
        if self.chat:
            return {
                "id": "x",
                "object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
        return {
            "id": "x",
            "object": "text_completion",
            "choices": [{"index": 0, "text": delta.get("text", ""), "finish_reason": finish}],
        }

    def _usage(self, completion: int) -> dict:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": completion,
            "total_tokens": self.prompt_tokens + completion,
        }


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def _perf_s() -> float:
    return perf_counter_ns() / 1e9


def _prompt_words(req: dict) -> int:
    if "messages" in req:
        return sum(len(str(m.get("content", "")).split()) for m in req["messages"])
    return len(str(req.get("prompt", "")).split())


class ScriptedServer:
    """``async with ScriptedServer(default=Script(...), scripts={"model": Script(...)}) as s:``."""

    def __init__(
        self,
        default: Script | None = None,
        scripts: dict[str, Script] | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.default = default or Script()
        self.scripts = scripts or {}
        self.host, self.port = host, port
        self.ssl_context = ssl_context  # serve HTTPS (e.g. a self-signed test certificate)
        self.stats = ServerStats()
        self.connections: set[_Connection] = set()
        self._server: asyncio.AbstractServer | None = None

    @property
    def url(self) -> str:
        scheme = "https" if self.ssl_context is not None else "http"
        return f"{scheme}://{self.host}:{self.port}/v1"

    async def start(self) -> ScriptedServer:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: _Connection(self), self.host, self.port, ssl=self.ssl_context
        )
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            for conn in list(self.connections):
                if conn.transport is not None:
                    conn.transport.abort()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()

    async def __aenter__(self) -> ScriptedServer:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
