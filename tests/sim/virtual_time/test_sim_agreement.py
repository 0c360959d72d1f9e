"""The two clocks agree: one workload through the real-time server and the virtual runner."""

from __future__ import annotations

import asyncio
import time

import aiohttp
import numpy as np
import pytest

from tokenpace.core.workload.lengths import parse_length
from tokenpace.sim import SimServer, VirtualLoad, run_virtual
from tokenpace.sim.virtual_time.virtual_load import filler_prompt


async def _replay(url: str, plan) -> list[tuple[float, float, int]]:
    """Send each planned request at its virtual send time; returns (ttft, e2e, tokens) per request."""
    out: list[tuple[float, float, int]] = []
    conn = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=conn) as s:
        # Warm the connection pool so connection set-up is not timed as TTFT.
        await asyncio.gather(*(s.get(url + "/models") for _ in range(16)))
        t0 = time.perf_counter() + 0.05

        async def one(r):
            await asyncio.sleep(max(0.0, t0 + r.sent - time.perf_counter()))
            body = {
                "prompt": " ".join(filler_prompt(r.index, r.input_tokens, 0)),
                "max_tokens": r.output_tokens,
                "ignore_eos": True,
                "stream": True,
            }
            sent = time.perf_counter()
            first, n = None, 0
            async with s.post(url + "/completions", json=body) as resp:
                async for line in resp.content:
                    if line.startswith(b'data: {"id"') and b'"text":" ' in line:
                        n += 1
                        if first is None:
                            first = time.perf_counter()
            out.append((first - sent, time.perf_counter() - sent, n))

        await asyncio.gather(*(one(r) for r in plan))
    return out


@pytest.mark.timing
def test_real_and_virtual_clocks_give_the_same_distributions():
    w = VirtualLoad(
        input_len=parse_length("200:3000"),
        output_len=parse_length("20:60"),
        rates=(6.0,),
        step_duration_s=5.0,
        seed=11,
    )
    virtual = run_virtual(w)
    assert len(virtual) > 15

    async def main():
        async with SimServer() as srv:
            return await _replay(srv.url, virtual)

    real = asyncio.run(main())
    assert [n for *_, n in sorted(real, key=lambda x: x[2])] == sorted(r.output_tokens for r in virtual)
    v_ttft = np.array([r.ttft for r in virtual]) * 1e3
    r_ttft = np.array([t for t, _, _ in real]) * 1e3
    v_tpot = np.array([r.tpot for r in virtual]) * 1e3
    r_tpot = np.array([(e - t) / (n - 1) for t, e, n in real]) * 1e3
    for q in (50, 90):
        v, r = np.percentile(v_ttft, q), np.percentile(r_ttft, q)
        assert abs(r - v) <= 0.15 * v + 4.0, (q, v, r)
    for q in (50, 90):
        v, r = np.percentile(v_tpot, q), np.percentile(r_tpot, q)
        assert abs(r - v) <= 0.10 * v + 1.0, (q, v, r)
