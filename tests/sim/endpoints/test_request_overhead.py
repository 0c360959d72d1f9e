"""The real-time sim's per-request cost outside the steps (`efficiency.request_overhead_ms`): the engine
sees a request that much after it arrived, so its first token never comes sooner (a lower bound, not
a timing measurement: a slow machine only makes it later)."""

from __future__ import annotations

import asyncio
import time

import aiohttp

from tokenpace.sim import SimServer, get_profile

OVERHEAD_MS = 300.0


async def _first_token_s(profile_overhead_ms: float) -> float:
    prof = get_profile().with_overrides(efficiency={"request_overhead_ms": profile_overhead_ms})
    body = {"model": "m", "prompt": "hello", "max_tokens": 2, "stream": True}
    async with SimServer(prof) as srv, aiohttp.ClientSession() as session:
        t0 = time.perf_counter()
        async with session.post(srv.url + "/completions", json=body) as r:
            assert r.status == 200
            async for line in r.content:
                if line.startswith(b"data: {"):
                    return time.perf_counter() - t0
    raise AssertionError("no token streamed")


def test_the_engine_sees_a_request_after_its_overhead() -> None:
    assert asyncio.run(_first_token_s(OVERHEAD_MS)) >= OVERHEAD_MS / 1e3
