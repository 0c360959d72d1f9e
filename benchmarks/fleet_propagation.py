"""How long a change made through one replica of a fleet takes to run on every replica.

Three gateways (in this process, each with its own connection to the store) in front of two
scripted upstreams on 127.0.0.1, sharing one store (``--store``: a SQLite file by default, or a
PostgreSQL URL), ``--changes`` moves of the split, each through the next replica in turn: the
time from sending ``POST /tokenpace/config`` to the first moment every replica's ``GET
/tokenpace/config`` shows the new epoch (polled every 5 ms: an upper bound by up to that much).

Printed: P50, P95 and the largest. Wall-clock time on whatever machine runs it: say how loaded it
was.

    .venv/bin/python benchmarks/fleet_propagation.py [--changes 30] [--store URL]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

import aiohttp

from tokenpace.adapters.store import connect
from tokenpace.gateway.config.config import GatewayConfig, parse_upstream
from tokenpace.gateway.lifecycle.fleet_sync import FleetLink, Follow
from tokenpace.gateway.lifecycle.serve import RunningGateway
from tokenpace.testing.scripted_server import Script, ScriptedServer

KEY = "benchmark-admin-key"
AUTH = {"Authorization": f"Bearer {KEY}"}
REPLICAS = 3


async def _epochs(s: aiohttp.ClientSession, gws: list[RunningGateway]) -> list[int]:
    out = []
    for gw in gws:
        async with s.get(gw.admin_url + "/tokenpace/config", headers=AUTH) as r:
            out.append((await r.json())["epoch"])
    return out


async def run(changes: int, store_url: str) -> list[float]:
    async with ScriptedServer(Script()) as a, ScriptedServer(Script()) as b:
        ups = (parse_upstream(f"a={a.url},weight=99"), parse_upstream(f"b={b.url},weight=1"))
        config = GatewayConfig(upstreams=ups, port=0, admin_keys=frozenset({KEY}))
        gws, fleet = [], f"bench-{time.time_ns()}"
        for i in range(REPLICAS):
            link = FleetLink(connect(store_url), fleet, f"s{i}", f"r{i}")
            gws.append(await RunningGateway(config, follow=Follow(link=link)).start())
        took = []
        try:
            async with aiohttp.ClientSession() as s:
                for n in range(1, changes + 1):
                    via = gws[n % REPLICAS]
                    move = {"weights": {"b": 1 + n % 50}, "by": "benchmark"}
                    t0 = time.perf_counter()
                    async with s.post(via.admin_url + "/tokenpace/config", json=move, headers=AUTH) as r:
                        epoch = (await r.json())["epoch"]
                    while await _epochs(s, gws) != [epoch] * REPLICAS:
                        await asyncio.sleep(0.005)
                    took.append(time.perf_counter() - t0)
        finally:
            for gw in gws:
                await gw.stop()
        return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--changes", type=int, default=30)
    parser.add_argument("--store", default=None, help="the shared store (default: a new SQLite file)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url = args.store or f"sqlite:///{Path(tmp) / 'runs.db'}"
        took = sorted(asyncio.run(run(args.changes, url)))
    p95 = took[min(len(took) - 1, round(0.95 * (len(took) - 1)))]
    print(f"{REPLICAS} replicas, {len(took)} changes, {url.split(':')[0]} store")
    print(
        f"every replica on the new epoch after: P50 {statistics.median(took) * 1000:.0f} ms, "
        f"P95 {p95 * 1000:.0f} ms, max {took[-1] * 1000:.0f} ms"
    )


if __name__ == "__main__":
    main()
