"""TTFT and E2E added by the gateway against hitting the upstream directly, at 1 and 100 streams.

The upstream is the scripted server (fixed TTFT and ITL); one aiohttp client measures both paths
with the same code, alternating direct and proxied rounds so drift hits both equally. Overhead
percentiles are differences of the two paths' percentiles (the paths are measured separately).

    .venv/bin/python benchmarks/gateway_overhead.py [--requests 400] [--tokens 64]
"""

from __future__ import annotations

import argparse
import asyncio
import time

import aiohttp
import numpy as np

from tokenpace.gateway.config import GatewayConfig, parse_upstream
from tokenpace.gateway.serve import RunningGateway
from tokenpace.testing.scripted_server import Script, ScriptedServer


async def one(s: aiohttp.ClientSession, url: str, tokens: int) -> tuple[float, float]:
    body = {
        "model": "m",
        "messages": [{"role": "user", "content": "x"}],
        "max_tokens": tokens,
        "stream": True,
    }
    t0 = time.perf_counter_ns()
    first = None
    async with s.post(url, json=body) as r:
        async for line in r.content:
            if first is None and b'"content":" tok' in line:
                first = time.perf_counter_ns()
    end = time.perf_counter_ns()
    return ((first or end) - t0) / 1e6, (end - t0) / 1e6


async def rounds(s, url: str, conc: int, n: int, tokens: int) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    sem = asyncio.Semaphore(conc)

    async def go() -> None:
        async with sem:
            out.append(await one(s, url, tokens))

    await asyncio.gather(*(go() for _ in range(n)))
    return out


async def main(requests: int, tokens: int) -> None:
    async with ScriptedServer(Script(ttft_s=0.02, itl_s=0.005)) as up:
        config = GatewayConfig(upstreams=(parse_upstream(f"up={up.url}"),), port=0)
        async with RunningGateway(config) as gw:
            conn = aiohttp.TCPConnector(limit=0)
            async with aiohttp.ClientSession(connector=conn) as s:
                direct_url = up.url + "/chat/completions"
                gw_url = gw.url + "/v1/chat/completions"
                await rounds(s, direct_url, 10, 20, tokens)
                await rounds(s, gw_url, 10, 20, tokens)  # warm both connection pools
                print("| streams | metric | direct P50 | via gateway P50 | added P50 | added P99 |")
                print("|---|---|---|---|---|---|")
                for conc in (1, 100):
                    n = requests if conc > 1 else max(50, requests // 4)
                    d: list[tuple[float, float]] = []
                    g: list[tuple[float, float]] = []
                    for _ in range(4):  # alternate to share drift
                        d += await rounds(s, direct_url, conc, n // 4, tokens)
                        g += await rounds(s, gw_url, conc, n // 4, tokens)
                    for i, name in ((0, "TTFT"), (1, "E2E")):
                        dv, gv = np.array([x[i] for x in d]), np.array([x[i] for x in g])
                        p50d, p50g = np.percentile(dv, 50), np.percentile(gv, 50)
                        p99 = np.percentile(gv, 99) - np.percentile(dv, 99)
                        print(
                            f"| {conc} | {name} | {p50d:.2f} ms | {p50g:.2f} ms | {p50g - p50d:+.2f} ms | "
                            f"{p99:+.2f} ms |"
                        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--tokens", type=int, default=64)
    args = parser.parse_args()
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    asyncio.run(main(args.requests, args.tokens))
