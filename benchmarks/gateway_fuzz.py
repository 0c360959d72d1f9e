"""The fuzzer's long budget (issue 38): hostile upstream peers beside 12 healthy streams through one
``tokenpace gateway`` process, and the bounds measured, not asserted.

Three processes: the peers' upstream (tokenpace.testing.fuzz_peers, one behaviour per model name),
the gateway (no store) and this client. A quiet phase measures the healthy streams' TTFT alone; then
each scenario runs its hostile requests (``--hostile`` at once, again and again) for ``--seconds``
beside the 12 healthy lanes and a /metrics probe every 100 ms. The gateway's RSS is read from /proc
every 100 ms. A scenario holds when: healthy TTFT P99 < 3x quiet P99 + 50 ms, the slowest /metrics
answer < 0.5 s, the gateway's peak RSS < 250 MB (issue 38's acceptance). ``fuzz`` draws
``--draws`` peers at random (``--seed``) from the same space as the test suite's fuzzer.

    .venv/bin/python benchmarks/gateway_fuzz.py [--seconds 5] [--hostile 20] [--draws 40] [--seed 1]

``--issue49`` runs issue 49's classes instead (benchmarks/hostile_classes.py), beside 8 healthy lanes.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import numpy as np

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import hostile_classes
from gateway_overhead import free_port, wait_port

from tokenpace.testing.fuzz_peers import Peer

LANES = 12
SCENARIOS: dict[str, Peer] = {
    "byte-per-chunk": Peer(tokens=400, chunks=(1,)),
    "byte-per-chunk-gzip": Peer(tokens=400, gzip=True, chunks=(1,)),
    "gzip-of-4MiB-events": Peer(tokens=60, pad=70_000, gzip=True),
    "comment-flood": Peer(tokens=5, comments=200_000),
    "bom-cr-only": Peer(tokens=50, bom=True, line_end=b"\r", chunks=(7, 3)),
    "cut-mid-event": Peer(tokens=50, pad=5000, cut_after=100_000, chunks=(3000,)),
}
UPSTREAM = """
import asyncio, sys
from tokenpace.testing.fuzz_peers import FuzzUpstream, Peer
peers = eval(sys.stdin.read())
async def serve():
    up = FuzzUpstream(cache_bytes=1 << 30)  # every peer built once, before the measured phases
    up.peers.update(peers)
    for peer in peers.values():
        up.wire(peer)
    up.server = await asyncio.start_server(up._serve, "127.0.0.1", int(sys.argv[1]))
    await asyncio.Event().wait()
asyncio.run(serve())
"""


def draw(rng: random.Random) -> Peer:
    """One peer from the fuzzer's space (tests/gateway/operations/test_gateway_fuzz.py)."""
    return Peer(
        tokens=rng.randint(0, 200),
        pad=rng.choice([0, 1, 100, 5000, 70_000]),
        bom=rng.random() < 0.5,
        line_end=rng.choice([b"\n", b"\r\n", b"\r"]),
        comments=rng.choice([0, 1, 50, 5000, 100_000]),
        gzip=rng.random() < 0.5,
        chunks=tuple(rng.randint(1, 300) for _ in range(rng.randint(1, 4))),
        cut_after=None if rng.random() < 0.5 else rng.randint(0, 200_000),
    )


@dataclass
class Seen:
    ttft_s: list[float] = field(default_factory=list)
    metrics_s: list[float] = field(default_factory=list)
    rss_mb: float = 0.0
    failed: int = 0
    hostile: int = 0


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


async def healthy_lane(s: aiohttp.ClientSession, url: str, until: float, out: Seen) -> None:
    chat = {"model": "healthy", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    while time.perf_counter() < until:
        t0 = time.perf_counter()
        try:
            async with s.post(url + "/chat/completions", json=chat) as r:
                first = None
                async for _ in r.content.iter_any():
                    first = first or time.perf_counter()
            out.ttft_s.append((first or time.perf_counter()) - t0)
        except aiohttp.ClientError:
            out.failed += 1


async def hostile_lane(
    s: aiohttp.ClientSession, url: str, models: list[str], until: float, out: Seen
) -> None:
    i = 0
    while time.perf_counter() < until:
        chat = {
            "model": models[i % len(models)],
            "messages": [{"role": "user", "content": "x"}],
            "stream": True,
        }
        i += 1
        try:
            async with s.post(url + "/chat/completions", json=chat) as r:
                async for _ in r.content.iter_any():  # drained as sent: never inflated here
                    pass
        except aiohttp.ClientError:
            pass
        out.hostile += 1


async def watch(s: aiohttp.ClientSession, admin: str, pid: int, until: float, out: Seen) -> None:
    while time.perf_counter() < until:
        t0 = time.perf_counter()
        try:
            async with s.get(admin + "/metrics", timeout=aiohttp.ClientTimeout(total=30)) as r:
                await r.read()
        except (aiohttp.ClientError, asyncio.TimeoutError):
            pass
        out.metrics_s.append(time.perf_counter() - t0)
        out.rss_mb = max(out.rss_mb, rss_mb(pid))
        await asyncio.sleep(0.1)


Extra = Callable[[float], list[Coroutine[Any, Any, None]]]


async def phase(
    url: str,
    admin: str,
    pid: int,
    models: list[str],
    seconds: float,
    hostile: int,
    lanes: int = LANES,
    extra: Extra | None = None,
) -> Seen:
    out = Seen()
    until = time.perf_counter() + seconds
    # The hostile answers are drained compressed: inflating 20 gzip bombs in this process's loop
    # would delay the healthy lanes' reads here and be blamed on the gateway.
    async with (
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as s,
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0), auto_decompress=False) as raw,
    ):
        tasks = [healthy_lane(s, url, until, out) for _ in range(lanes)]
        tasks += [hostile_lane(raw, url, models, until, out) for _ in range(hostile if models else 0)]
        tasks += extra(until) if extra is not None else []
        await asyncio.gather(*tasks, watch(s, admin, pid, until, out))
    return out


def issue49(url: str, admin: str, pid: int, gw_port: int, seconds: float, records: str, only: str) -> None:
    lanes = hostile_classes.LANES
    quiet = asyncio.run(phase(url, admin, pid, [], seconds, 0, lanes))
    q99 = float(np.percentile(quiet.ttft_s, 99))
    print(f"quiet: healthy TTFT P99 {q99 * 1e3:.1f} ms over {len(quiet.ttft_s)} requests, {lanes} lanes")
    print(hostile_classes.HEADER)
    offset = 0
    for name, (kind, at_once, _) in hostile_classes.CLASSES.items():
        if only not in name:
            continue
        out = hostile_classes.Hostile()

        def extra(
            until: float, kind: str = kind, at_once: int = at_once, out: hostile_classes.Hostile = out
        ) -> list:
            return hostile_classes.hostile_tasks(kind, at_once, url, gw_port, until, out)

        seen = asyncio.run(phase(url, admin, pid, [], seconds, 0, lanes, extra))
        time.sleep(2.0)  # the records' writer lingers 1 s
        offset = hostile_classes.tally(records, offset, out)
        p99 = float(np.percentile(seen.ttft_s, 99)) if seen.ttft_s else float("inf")
        slowest = max(seen.metrics_s) if seen.metrics_s else float("inf")
        print(hostile_classes.row(name, q99, p99, slowest, seen.rss_mb, seen.failed, out), flush=True)
    print(f"load average {os.getloadavg()}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--hostile", type=int, default=20, help="hostile requests at once")
    ap.add_argument("--draws", type=int, default=40)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--issue49", action="store_true", help="issue 49's classes beside 8 healthy lanes")
    ap.add_argument("--only", default="", help="with --issue49: the classes whose name holds this")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    drawn = {f"fuzz-{i}": draw(rng) for i in range(args.draws)}
    peers = {**SCENARIOS, **drawn, **hostile_classes.PEERS}
    fd, records = tempfile.mkstemp(suffix=".jsonl")
    os.close(fd)
    up_port, gw_port, admin_port = free_port(), free_port(), free_port()
    upstream = subprocess.Popen([sys.executable, "-c", UPSTREAM, str(up_port)], stdin=subprocess.PIPE)
    assert upstream.stdin is not None
    upstream.stdin.write(repr(peers).encode())
    upstream.stdin.close()
    gateway = subprocess.Popen(
        [sys.executable, "-m", "tokenpace", "gateway", "--no-store", "--listen", f"127.0.0.1:{gw_port}",
         "--admin-listen", f"127.0.0.1:{admin_port}", "--upstream", f"up=http://127.0.0.1:{up_port}/v1",
         "--records", records],
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_port(up_port)
        wait_port(gw_port)
        url, admin = f"http://127.0.0.1:{gw_port}/v1", f"http://127.0.0.1:{admin_port}"
        if args.issue49:
            issue49(url, admin, gateway.pid, gw_port, args.seconds, records, args.only)
            return
        quiet = asyncio.run(phase(url, admin, gateway.pid, [], args.seconds, 0))
        q99 = float(np.percentile(quiet.ttft_s, 99))
        print(f"quiet: healthy TTFT P99 {q99 * 1e3:.1f} ms over {len(quiet.ttft_s)} requests")
        print("| scenario | hostile requests | healthy TTFT P99 (ms) | bound (ms) | slowest /metrics (s) | "
              "gateway peak RSS (MB) | healthy failed | holds |")  # fmt: skip
        print("|---|---|---|---|---|---|---|---|")
        runs = [(name, [name]) for name in SCENARIOS] + [("fuzz (drawn peers)", list(drawn))]
        for name, models in runs:
            seen = asyncio.run(phase(url, admin, gateway.pid, models, args.seconds, args.hostile))
            p99 = float(np.percentile(seen.ttft_s, 99)) if seen.ttft_s else float("inf")
            bound = 3 * q99 + 0.050
            slowest = max(seen.metrics_s) if seen.metrics_s else float("inf")
            holds = p99 < bound and slowest < 0.5 and seen.rss_mb < 250 and not seen.failed
            print(f"| {name} | {seen.hostile} | {p99 * 1e3:.1f} | {bound * 1e3:.1f} | {slowest:.3f} | "
                  f"{seen.rss_mb:.0f} | {seen.failed} | {'yes' if holds else 'no'} |")  # fmt: skip
    finally:
        os.unlink(records)
        for p in (gateway, upstream):
            p.terminate()
        for p in (gateway, upstream):
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


if __name__ == "__main__":
    main()
