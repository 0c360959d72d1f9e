"""Reference clients: the floor tokenpace is compared against on the same machine.

Both send the same chat-completions request tokenpace sends (64-word prompt, max_tokens 64,
stream with usage), keep their connections alive, drive the same closed or open (Poisson) loop,
and take each timestamp as soon as bytes reach their coroutine, before any JSON decoding:

- ``raw``: plain asyncio streams on uvloop, hand-rolled chunked + SSE parsing, orjson;
- ``aiohttp``: one ``aiohttp.ClientSession`` with an unlimited connector, ``iter_any()``.

Neither imports tokenpace: they are what a careful engineer writes in an afternoon.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from time import perf_counter_ns

import numpy as np
import orjson

PROMPT = " ".join(["hello"] * 64)


@dataclass(slots=True)
class Rec:
    request_id: str
    scheduled_ns: int = 0
    dispatched_ns: int = 0
    sent_ns: int = 0
    token_ns: list[int] = field(default_factory=list)
    end_ns: int = 0
    status: str = "ok"
    error: str | None = None

    def to_dict(self) -> dict:
        return {
            "request_id": self.request_id,
            "scheduled_ns": self.scheduled_ns,
            "dispatched_ns": self.dispatched_ns,
            "sent_ns": self.sent_ns,
            "first_token_ns": self.token_ns[0] if self.token_ns else None,
            "token_ns": self.token_ns,
            "end_ns": self.end_ns,
            "status": self.status,
            "error": self.error,
        }


def request_body(model: str) -> bytes:
    return orjson.dumps(
        {
            "model": model,
            "messages": [{"role": "user", "content": PROMPT}],
            "max_tokens": 64,
            "temperature": 0.0,
            "top_p": 1.0,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
    )


def _sse_tokens(sse: bytes, rec: Rec, now: int) -> tuple[bytes, bool]:
    """Consumes complete events from ``sse``; returns the rest and whether [DONE] was seen."""
    done = False
    while True:
        j = sse.find(b"\n\n")
        if j < 0:
            return sse, done
        event, sse = sse[:j], sse[j + 2 :]
        if not event.startswith(b"data: "):
            continue
        data = event[6:]
        if data == b"[DONE]":
            done = True
            continue
        chunk = orjson.loads(data)
        choices = chunk.get("choices")
        if choices and (choices[0].get("delta") or {}).get("content"):
            rec.token_ns.append(now)


# --- raw: asyncio streams ---
class RawClient:
    def __init__(self, host: str, port: int, model: str) -> None:
        self.host, self.port = host, port
        self.body = request_body(model)
        self.head = (
            f"POST /v1/chat/completions HTTP/1.1\r\nHost: {host}:{port}\r\n"
            "Content-Type: application/json\r\nAccept: text/event-stream\r\n"
            f"Content-Length: {len(self.body)}\r\n"
        ).encode()
        self.idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
        self.all: list[asyncio.StreamWriter] = []

    async def request(self, rec: Rec) -> None:
        payload = self.head + b"x-request-id: " + rec.request_id.encode() + b"\r\n\r\n" + self.body
        rec.sent_ns = perf_counter_ns()
        if self.idle:
            reader, writer = self.idle.pop()
        else:
            reader, writer = await asyncio.open_connection(self.host, self.port, limit=1 << 20)
            self.all.append(writer)
        writer.write(payload)
        buf = b""
        while (k := buf.find(b"\r\n\r\n")) < 0:
            data = await reader.read(65536)
            if not data:
                raise ConnectionError("closed before headers")
            buf += data
        now = perf_counter_ns()
        if not buf.startswith(b"HTTP/1.1 200"):
            raise ConnectionError(buf[:40].decode("latin-1"))
        raw, sse, done, finished = buf[k + 4 :], b"", False, False
        while True:
            while True:  # chunked transfer decoding
                i = raw.find(b"\r\n")
                if i < 0:
                    break
                size = int(raw[:i], 16)
                if len(raw) < i + 4 + size:
                    break
                sse += raw[i + 2 : i + 2 + size]
                raw = raw[i + 4 + size :]
                if size == 0:
                    finished = True
                    break
            sse, saw_done = _sse_tokens(sse, rec, now)
            done = done or saw_done
            if finished:
                break
            data = await reader.read(65536)
            now = perf_counter_ns()
            if not data:
                raise ConnectionError("closed mid-stream")
            raw += data
        rec.end_ns = now
        if not done:
            raise ConnectionError("no [DONE]")
        self.idle.append((reader, writer))

    async def close(self) -> None:
        for w in self.all:
            w.close()
        await asyncio.sleep(0)


# --- aiohttp ---
class AiohttpClient:
    def __init__(self, host: str, port: int, model: str) -> None:
        import aiohttp

        self.url = f"http://{host}:{port}/v1/chat/completions"
        self.body = request_body(model)
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0),
            timeout=aiohttp.ClientTimeout(total=120),
        )

    async def request(self, rec: Rec) -> None:
        headers = {
            "Content-Type": "application/json",
            "Accept": "text/event-stream",
            "x-request-id": rec.request_id,
        }
        rec.sent_ns = perf_counter_ns()
        done = False
        async with self.session.post(self.url, data=self.body, headers=headers) as resp:
            if resp.status != 200:
                raise ConnectionError(f"HTTP {resp.status}")
            sse = b""
            async for data in resp.content.iter_any():
                now = perf_counter_ns()
                sse += data
                sse, saw_done = _sse_tokens(sse, rec, now)
                done = done or saw_done
        rec.end_ns = perf_counter_ns()
        if not done:
            raise ConnectionError("no [DONE]")

    async def close(self) -> None:
        await self.session.close()


# --- load: the same closed and open loops tokenpace drives ---
class LoopLagProbe:
    """The probe tokenpace's HealthMonitor uses: how long a call_soon waits, every 20 ms."""

    def __init__(self) -> None:
        self.lags_ms: list[float] = []
        self.task: asyncio.Task | None = None

    def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        lags = self.lags_ms

        def ran(asked: float) -> None:
            lags.append((time.perf_counter() - asked) * 1000)

        while True:
            await asyncio.sleep(0.02)
            loop.call_soon(ran, time.perf_counter())

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task


async def drive(
    request: Callable[[Rec], Awaitable[None]],
    prefix: str,
    requests: int,
    concurrency: int | None,
    rate: float | None,
    seed: int = 0,
) -> list[Rec]:
    recs: list[Rec] = []

    async def one(rec: Rec) -> None:
        recs.append(rec)
        try:
            await request(rec)
        except Exception as exc:
            rec.status, rec.error = "error", f"{type(exc).__name__}: {exc}"
            rec.end_ns = perf_counter_ns()

    if rate is None:
        counter = iter(range(requests))

        async def user() -> None:
            for i in counter:
                rec = Rec(f"{prefix}{i}")
                rec.scheduled_ns = rec.dispatched_ns = perf_counter_ns()
                await one(rec)

        await asyncio.gather(*(user() for _ in range(concurrency or 1)))
        return recs
    rng = np.random.default_rng(seed + 1)
    offsets = np.cumsum(rng.exponential(1.0 / rate, size=requests))
    offsets -= offsets[0]
    loop = asyncio.get_running_loop()
    tasks = []
    t0 = perf_counter_ns()
    for i, off in enumerate(offsets):
        scheduled = t0 + int(off * 1e9)
        delay = (scheduled - perf_counter_ns()) / 1e9
        if delay > 0:
            await asyncio.sleep(delay)
        rec = Rec(f"{prefix}{i}", scheduled_ns=scheduled, dispatched_ns=perf_counter_ns())
        tasks.append(loop.create_task(one(rec)))
    await asyncio.gather(*tasks)
    return recs
