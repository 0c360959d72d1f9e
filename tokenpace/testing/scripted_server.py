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
from collections import deque
from dataclasses import dataclass, field
from time import perf_counter_ns
from typing import Any

import orjson

from tokenpace.testing.scripted_timing import Behaviour, Timing
from tokenpace.wire.http1.server import HttpRequest, ServerConnection


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
    echo_headers: bool = False  # the error message repeats the request's headers (as some servers do)
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
    read: dict[str, int] = field(default_factory=dict)  # request id -> when its request had been read
    # the headers of the last requests received (name lower-cased -> raw value), for tests
    headers: deque[dict[str, bytes]] = field(default_factory=lambda: deque(maxlen=256))


class _Answer:
    """Answers one request on its connection (the shared server half queues pipelined ones)."""

    def __init__(self, server: ScriptedServer, req: HttpRequest) -> None:
        self.server = server
        self.conn = req.conn
        self.headers = req.headers

    def run(self, req: HttpRequest, read_ns: int) -> None:
        """``read_ns``: when the request had been read; the first token is due ttft_s after it."""
        self.server.stats.requests += 1
        self.server.stats.headers.append({k: v.encode("latin-1") for k, v in self.headers.items()})
        if req.path.endswith("/models"):
            self._respond(200, {"object": "list", "data": [{"id": "scripted", "object": "model"}]})
            return
        try:
            body = orjson.loads(req.body)
        except orjson.JSONDecodeError:
            self._respond(400, {"error": {"message": "bad json", "type": "invalid_request"}})
            return
        chat = req.path.endswith("/chat/completions")
        script = self.server.scripts.get(body.get("model", ""), self.server.default)
        self._serve(body, script, chat, read_ns)

    # --- responses ---
    def _respond(
        self, status: int, payload: dict[str, Any], extra: list[tuple[str, str]] | None = None
    ) -> None:
        self.conn.respond(
            status, orjson.dumps(payload), [("content-type", "application/json"), *(extra or [])]
        )

    def _echo(self, script: Script) -> str:
        if not script.echo_headers:
            return ""
        return "; got " + ", ".join(f"{k}: {v}" for k, v in self.headers.items())

    def _serve(self, req: dict[str, Any], script: Script, chat: bool, read_ns: int) -> None:
        rid = self.headers.get("x-request-id", "")
        if rid:
            self.server.stats.read[rid] = read_ns
        if script.close_before_headers:
            self.conn.abort()
            return
        if script.http_status:
            extra = [("retry-after", str(script.retry_after))] if script.retry_after else []
            self._respond(
                script.http_status,
                {
                    "error": {
                        "message": f"scripted {script.http_status}" + self._echo(script),
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
        self.conn.start_stream(200, [("content-type", "text/event-stream"), ("x-request-id", rid)])
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
        read_at = loop.time() + (read_ns / 1e9 - _perf_s())
        self.conn.on_lost = stream.cancel
        timing = self.server.timing
        if timing is None:
            start = read_at + script.ttft_s
            stream.handle = loop.call_at(start, stream.emit, 0, start)
            return

        def begin() -> None:  # now, or when a slot frees
            now = max(read_at, loop.time())
            start = timing.after_freeze(now + timing.first_token_delay(script.ttft_s, now))
            stream.handle = loop.call_at(start, stream.emit, 0, start)

        stream.timing = timing
        timing.acquire(begin)

    def _full(
        self, req: dict[str, Any], script: Script, chat: bool, n: int, prompt_tokens: int, read_ns: int
    ) -> None:
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
        self.conn.on_lost = loop.call_later(delay, self._respond, 200, payload).cancel

    def write_event(self, data: bytes, script: Script) -> None:
        nl = b"\r\n" if script.crlf else b"\n"
        event = b"data: " + data + nl + nl
        if script.comments:
            event = b": keep-alive" + nl + event
        if script.split_events:
            half = len(event) // 2
            self.conn.write_chunk(event[:half])
            self.conn.write_chunk(event[half:])
        else:
            self.conn.write_chunk(event)


class _Stream:
    """Emits one request's chunks on schedule; each emission schedules the next."""

    def __init__(
        self,
        answer: _Answer,
        script: Script,
        chat: bool,
        n: int,
        prompt_tokens: int,
        rid: str,
        include_usage: bool,
    ) -> None:
        self.answer, self.script, self.chat, self.n = answer, script, chat, n
        self.prompt_tokens, self.rid, self.include_usage = prompt_tokens, rid, include_usage
        self.truth = answer.server.stats.truth.setdefault(rid, [])
        self.handle: asyncio.TimerHandle | None = None  # the next emission
        self.timing: Timing | None = None  # server-wide timing, when the server has a Behaviour

    def cancel(self) -> None:
        if self.handle is not None:
            self.handle.cancel()
        self.finished()

    def finished(self) -> None:
        """The stream holds no slot any more (ended, failed or its connection lost)."""
        if self.timing is not None:
            timing, self.timing = self.timing, None
            timing.release()

    def emit(self, i: int, due: float) -> None:
        s, answer = self.script, self.answer
        if i == 0 and s.role_chunk and self.chat:
            answer.write_event(orjson.dumps(self._chunk({"role": "assistant", "content": ""}, None)), s)
        if i == 0 and s.null_first_content and self.chat:
            answer.write_event(orjson.dumps(self._chunk({"content": None}, None)), s)
        if s.stall_after is not None and i >= s.stall_after:
            return
        if s.cut_after is not None and i >= s.cut_after:
            answer.conn.abort()
            self.finished()
            return
        if s.malformed_after is not None and i >= s.malformed_after:
            answer.write_event(b'{"choices": [{"delta": {"content": "x"', s)
            return
        if s.error_event_after is not None and i >= s.error_event_after:
            answer.write_event(orjson.dumps({"error": {"message": "scripted engine failure"}}), s)
            answer.conn.end_stream()
            self.finished()
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
            answer.write_event(orjson.dumps(chunk), s)
            loop = asyncio.get_running_loop()
            timing = self.timing
            nxt = due + s.itl_s if timing is None else timing.after_freeze(due + s.itl_s * timing.speed(due))
            self.handle = loop.call_at(nxt, self.emit, i + 1, nxt)
            return
        if self.include_usage and s.usage:
            answer.write_event(
                orjson.dumps({"id": "x", "choices": [], "usage": self._usage(self.n * s.tokens_per_chunk)}), s
            )
        if s.send_done:
            answer.write_event(b"[DONE]", s)
        answer.conn.end_stream()
        self.finished()

    def _chunk(self, delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
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

    def _usage(self, completion: int) -> dict[str, Any]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": completion,
            "total_tokens": self.prompt_tokens + completion,
        }


def _perf_s() -> float:
    return perf_counter_ns() / 1e9


def _prompt_words(req: dict[str, Any]) -> int:
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
        backlog: int = 100,
        behaviour: Behaviour | None = None,
    ) -> None:
        self.default = default or Script()
        self.scripts = scripts or {}
        self.host, self.port = host, port
        self.ssl_context = ssl_context  # serve HTTPS (e.g. a self-signed test certificate)
        self.stats = ServerStats()
        self.backlog = backlog  # the benchmarks open hundreds of connections at once
        self.connections: set[ServerConnection] = set()
        self._server: asyncio.AbstractServer | None = None
        self.behaviour = behaviour  # server-wide timing: drift, slots, bimodal, a freeze
        self.timing: Timing | None = None

    @property
    def url(self) -> str:
        scheme = "https" if self.ssl_context is not None else "http"
        return f"{scheme}://{self.host}:{self.port}/v1"

    async def start(self) -> ScriptedServer:
        loop = asyncio.get_running_loop()
        if self.behaviour is not None:
            self.timing = Timing(self.behaviour, loop.time())
        self._server = await loop.create_server(
            lambda: ServerConnection(self._handle, self.connections.add, self.connections.discard),
            self.host,
            self.port,
            ssl=self.ssl_context,
            backlog=self.backlog,
        )
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            for conn in list(self.connections):
                conn.abort()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()

    def _handle(self, req: HttpRequest) -> None:
        read_ns = perf_counter_ns()
        _Answer(self, req).run(req, read_ns)

    async def __aenter__(self) -> ScriptedServer:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
