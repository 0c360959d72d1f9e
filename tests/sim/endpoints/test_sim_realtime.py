"""Engine behaviour seen through the real-time server: prefix cache, gauges, timing of the stream."""

from __future__ import annotations

import asyncio
import re
import time
from itertools import pairwise

import aiohttp
import pytest

from tokenpace.sim import SimServer
from tokenpace.sim.model.costmodel import CostModel


async def _ttft(s, url, prompt, max_tokens=2):
    t0 = time.perf_counter()
    times = []
    async with s.post(
        url + "/completions", json={"prompt": prompt, "max_tokens": max_tokens, "stream": True}
    ) as r:
        async for line in r.content:
            if b'"text":" ' in line:
                times.append(time.perf_counter())
    return times[0] - t0, times


def _metric(text, name):
    m = re.search(rf"^{re.escape(name)}{{[^}}]*}} (\S+)$", text, re.M)
    return float(m.group(1))


@pytest.mark.timing
def test_warm_prefix_ttft_is_several_times_lower_and_hits_are_exported():
    async def main():
        async with SimServer() as srv, aiohttp.ClientSession() as s:
            system = "you are a helpful assistant " * 1000  # 5000 shared tokens
            cold, _ = await _ttft(s, srv.url, system + "question one")
            warm, _ = await _ttft(s, srv.url, system + "question two")
            async with s.get(srv.url[:-3] + "/metrics") as r:
                return cold, warm, await r.text()

    cold, warm, text = asyncio.run(main())
    assert cold > 4 * warm, (cold, warm)
    hits, queries = (
        _metric(text, "vllm:prefix_cache_hits_total"),
        _metric(text, "vllm:prefix_cache_queries_total"),
    )
    assert queries == 2 * 5002 and 4900 < hits < 5002


@pytest.mark.timing
def test_gauges_follow_the_load_and_tokens_keep_the_model_pace():
    async def main():
        async with SimServer() as srv, aiohttp.ClientSession() as s:
            tasks = [
                asyncio.create_task(_ttft(s, srv.url, f"user {i} " + "word " * 300, 40)) for i in range(24)
            ]
            await asyncio.sleep(0.15)
            async with s.get(srv.url[:-3] + "/metrics") as r:
                during = await r.text()
            results = await asyncio.gather(*tasks)
            async with s.get(srv.url[:-3] + "/metrics") as r:
                after = await r.text()
            return during, after, results, srv.profile

    during, after, results, profile = asyncio.run(main())
    assert _metric(during, "vllm:num_requests_running") == 24
    assert _metric(during, "vllm:kv_cache_usage_perc") > 0
    assert (
        _metric(after, "vllm:num_requests_running") == 0 and _metric(after, "vllm:kv_cache_usage_perc") == 0
    )
    # Decode pace seen by a client matches the cost model's step time for this batch, within a millisecond.
    step = CostModel(profile).decode_step_seconds(24, 320)
    gaps = sorted(b - a for _, times in results for a, b in pairwise(times[5:]))
    median = gaps[len(gaps) // 2]
    assert abs(median - step) < 0.001 + 0.05 * step, (median, step)
