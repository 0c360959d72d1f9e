"""What engine tracing (``sim --otlp-endpoint``) costs the simulator's token timing: the emit lag
(how late each step's tokens leave against the step's model end time, tokenpace_sim_emit_lag) with
tracing off and on, under the same load, spans going to a real OTLP/HTTP receiver in this process.

Rounds alternate off/on so that drift on a shared machine hits both. The sim and the load client
share one event loop (like the test suite), so the numbers are an upper bound of the sim's own lag.

    .venv/bin/python benchmarks/sim_tracing_overhead.py [--requests 400] [--concurrency 64] [--rounds 2]
"""

from __future__ import annotations

import argparse
import asyncio

import aiohttp
import numpy as np

from tokenpace.sim.endpoints.server import SimServer
from tokenpace.testing.otlp_receiver import OtlpReceiver

BODY = {"model": "m", "messages": [{"role": "user", "content": "a b c d e f g h"}], "max_tokens": 32}
TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


async def one_round(endpoint: str | None, requests: int, concurrency: int) -> np.ndarray:
    async with SimServer("llama-3.1-8b-h100", otlp_endpoint=endpoint) as srv:
        left = iter(range(requests))
        connector = aiohttp.TCPConnector(limit=concurrency)
        async with aiohttp.ClientSession(connector=connector) as s:

            async def user() -> None:
                for _ in left:
                    body = {**BODY, "stream": True, "ignore_eos": True}
                    async with s.post(
                        srv.url + "/chat/completions", json=body, headers={"traceparent": TRACEPARENT}
                    ) as r:
                        await r.read()

            await asyncio.gather(*(user() for _ in range(concurrency)))
        return np.array(srv.lag_samples) * 1e3


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=400)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args()
    lags: dict[str, list[np.ndarray]] = {"off": [], "on": []}
    with OtlpReceiver(max_spans=4 * a.requests * a.rounds) as rx:
        for _ in range(a.rounds):
            for mode in ("off", "on"):
                endpoint = rx.url if mode == "on" else None
                lags[mode].append(asyncio.run(one_round(endpoint, a.requests, a.concurrency)))
        spans = len(rx.wait_for(10, until=lambda s: len(s) >= 4 * a.requests * a.rounds))
    print(f"{a.requests} requests x {a.rounds} rounds, {a.concurrency} streams; spans received: {spans}")
    print("| tracing | steps | emit lag P50 ms | P99 ms | max ms |")
    print("|---|---|---|---|---|")
    for mode, parts in lags.items():
        x = np.concatenate(parts)
        print(
            f"| {mode} | {len(x)} | {np.percentile(x, 50):.3f} | {np.percentile(x, 99):.3f} | {x.max():.3f} |"
        )


if __name__ == "__main__":
    main()
