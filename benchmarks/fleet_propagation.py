"""How long a change made through one replica of a fleet takes to run on every replica.

Three gateways (in this process, each with its own connection to the store) in front of two
scripted upstreams on 127.0.0.1, sharing one store (``--store``: a SQLite file by default, or a
PostgreSQL URL), ``--changes`` moves of the split, each through the next replica in turn and each
moving every user (all of the weight from one arm to the other). Measured from sending ``POST
/tokenpace/config``: (1) the first moment every replica's ``GET /tokenpace/config`` shows the new
epoch, (2) the first moment a new user's request through each replica reaches the new arm's
upstream (each replica probed in turn with a user never seen before, one request at a time: an
upper bound by up to one probe round).

Printed: P50, P95 and the largest of each. Wall-clock time on whatever machine runs it: say how
loaded it was.

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


CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}


async def _routed(s: aiohttp.ClientSession, gw: RunningGateway, to: ScriptedServer, user: str) -> bool:
    """Whether a request of ``user`` (never seen before) through ``gw`` reached ``to``."""
    async with s.post(gw.url + "/v1/chat/completions", json=CHAT, headers={"x-user-id": user}) as r:
        await r.read()
    return any(h.get("x-user-id") == user.encode() for h in to.stats.headers)


async def run(changes: int, store_url: str) -> tuple[list[float], list[float]]:
    async with ScriptedServer(Script()) as a, ScriptedServer(Script()) as b:
        ups = (parse_upstream(f"a={a.url},weight=99"), parse_upstream(f"b={b.url},weight=1"))
        config = GatewayConfig(upstreams=ups, port=0, admin_keys=frozenset({KEY}))
        gws, fleet = [], f"bench-{time.time_ns()}"
        for i in range(REPLICAS):
            link = FleetLink(connect(store_url), fleet, f"s{i}", f"r{i}")
            gws.append(await RunningGateway(config, follow=Follow(link=link)).start())
        took: list[float] = []
        routed: list[float] = []
        try:
            async with aiohttp.ClientSession() as s:
                for n in range(1, changes + 1):
                    via, to = gws[n % REPLICAS], (b, a)[n % 2 == 0]
                    move = {"weights": {"b": 100.0, "a": 0.0} if to is b else {"a": 100.0, "b": 0.0}}
                    to.stats.headers.clear()
                    t0 = time.perf_counter()
                    async with s.post(
                        via.admin_url + "/tokenpace/config", json={**move, "by": "benchmark"}, headers=AUTH
                    ) as r:
                        epoch = (await r.json())["epoch"]
                    waiting, probe = set(range(REPLICAS)), 0
                    while waiting or len(took) < n:
                        if len(took) < n and await _epochs(s, gws) == [epoch] * REPLICAS:
                            took.append(time.perf_counter() - t0)
                        for i in sorted(waiting):
                            probe += 1
                            if await _routed(s, gws[i], to, f"u{n}-{probe}"):
                                waiting.discard(i)
                        if not waiting and len(routed) < n:
                            routed.append(time.perf_counter() - t0)
                        await asyncio.sleep(0.005)
        finally:
            for gw in gws:
                await gw.stop()
        return took, routed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--changes", type=int, default=30)
    parser.add_argument("--store", default=None, help="the shared store (default: a new SQLite file)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url = args.store or f"sqlite:///{Path(tmp) / 'runs.db'}"
        epochs, routes = asyncio.run(run(args.changes, url))
    print(f"{REPLICAS} replicas, {len(epochs)} changes, {url.split(':')[0]} store")
    for what, took in (("on the new epoch", epochs), ("routing new users to the new arm", routes)):
        took = sorted(took)
        p95 = took[min(len(took) - 1, round(0.95 * (len(took) - 1)))]
        print(
            f"every replica {what} after: P50 {statistics.median(took) * 1000:.0f} ms, "
            f"P95 {p95 * 1000:.0f} ms, max {took[-1] * 1000:.0f} ms"
        )


if __name__ == "__main__":
    main()
