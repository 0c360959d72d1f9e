"""TTFT and E2E added by the gateway against hitting the upstream directly, at 1 and 100 streams.

Three processes: the scripted upstream (fixed TTFT and ITL), ``tokenpace gateway`` (uvloop, no
store) and this load client, so the gateway has its own event loop. With ``--pin`` (Linux,
``taskset``) each gets the cores given: ``--pin 0,1,0`` = upstream, gateway, client cores. One
aiohttp client measures both paths with the same code, alternating direct and proxied rounds so
drift hits both equally. Overhead percentiles are differences of the two paths' percentiles (the
paths are measured separately).

    .venv/bin/python benchmarks/gateway_overhead.py [--requests 400] [--tokens 64] [--pin 0,1,0]
        [--streams 1,16,100] [--workers N]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager

import aiohttp
import numpy as np

UPSTREAM = """
import asyncio, sys, uvloop
from tokenpace.testing.scripted_server import Script, ScriptedServer
async def serve():
    async with ScriptedServer(Script(ttft_s=0.02, itl_s=0.005), port=int(sys.argv[1])):
        await asyncio.Event().wait()
uvloop.install()
asyncio.run(serve())
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pinned(cmd: list[str], core: str | None) -> list[str]:
    return ["taskset", "-c", core, *cmd] if core is not None and shutil.which("taskset") else cmd


def cpu_s(pid: int) -> tuple[float, float]:
    """User and system CPU seconds of a process and its children (--workers) so far (Linux /proc;
    zeros elsewhere)."""
    user, system = _cpu_one(pid)
    kids: list[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):  # --workers starts them from a helper thread
            with open(f"/proc/{pid}/task/{task}/children") as fh:
                kids += [int(k) for k in fh.read().split()]
    except OSError:
        pass
    for kid in kids:
        u, s = cpu_s(kid)
        user, system = user + u, system + s
    return user, system


def _cpu_one(pid: int) -> tuple[float, float]:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0, 0.0
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def wait_port(port: int, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port}")


@contextmanager
def servers(
    pin: list[str | None], workers: int = 1, store: str | None = None
) -> Iterator[tuple[str, str, int]]:
    up_port, gw_port = free_port(), free_port()
    keep = ["--store", store] if store else ["--no-store"]  # the store on is what users run by default
    gateway = [sys.executable, "-m", "tokenpace", "gateway", *keep, "--listen", f"127.0.0.1:{gw_port}"]
    gateway += ["--workers", str(workers)] if workers > 1 else []
    gateway += ["--upstream", f"up=http://127.0.0.1:{up_port}/v1"]
    procs = [
        subprocess.Popen(pinned([sys.executable, "-c", UPSTREAM, str(up_port)], pin[0])),
        subprocess.Popen(pinned(gateway, pin[1]), stderr=subprocess.DEVNULL),
    ]
    try:
        wait_port(up_port)
        wait_port(gw_port)
        yield f"http://127.0.0.1:{up_port}/v1", f"http://127.0.0.1:{gw_port}/v1", procs[1].pid
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


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


async def main(
    requests: int,
    tokens: int,
    pin: list[str | None],
    streams: list[int],
    workers: int = 1,
    store: bool = False,
) -> None:
    with (
        tempfile.TemporaryDirectory() as tmp,
        servers(pin, workers, os.path.join(tmp, "runs.db") if store else None) as (up_url, gw_base, gw_pid),
    ):
        conn = aiohttp.TCPConnector(limit=0)
        async with aiohttp.ClientSession(connector=conn) as s:
            direct_url = up_url + "/chat/completions"
            gw_url = gw_base + "/chat/completions"
            await rounds(s, direct_url, 100, 200, tokens)
            await rounds(s, gw_url, 100, 200, tokens)  # warm both connection pools
            print(
                f"load average before: {os.getloadavg()[0]:.2f}; cores (upstream, gateway, client): {pin}; "
                f"store {'on' if store else 'off'}"
            )
            print("| streams | metric | direct P50 | via gateway P50 | added P50 | added P99 |")
            print("|---|---|---|---|---|---|")
            cpu_notes: list[str] = []
            for conc in streams:
                n = requests if conc > 1 else max(50, requests // 4)
                d: list[tuple[float, float]] = []
                g: list[tuple[float, float]] = []
                cpu = [0.0, 0.0]
                for _ in range(4):  # alternate to share drift
                    d += await rounds(s, direct_url, conc, n // 4, tokens)
                    u0, s0 = cpu_s(gw_pid)
                    g += await rounds(s, gw_url, conc, n // 4, tokens)
                    u1, s1 = cpu_s(gw_pid)
                    cpu[0] += u1 - u0
                    cpu[1] += s1 - s0
                chunks = len(g) * (tokens + 2)  # role chunk, tokens, [DONE]
                cpu_notes.append(
                    f"{conc} streams: gateway CPU {1e6 * cpu[0] / chunks:.1f} us user + "
                    f"{1e6 * cpu[1] / chunks:.1f} us system per chunk"
                )
                for i, name in ((0, "TTFT"), (1, "E2E")):
                    dv, gv = np.array([x[i] for x in d]), np.array([x[i] for x in g])
                    p50d, p50g = np.percentile(dv, 50), np.percentile(gv, 50)
                    p99 = np.percentile(gv, 99) - np.percentile(dv, 99)
                    print(
                        f"| {conc} | {name} | {p50d:.2f} ms | {p50g:.2f} ms | {p50g - p50d:+.2f} ms | "
                        f"{p99:+.2f} ms |"
                    )
            for note in cpu_notes:
                print(note)
            print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--pin", default=None, help="cores for upstream,gateway,client, e.g. 0,1,0")
    parser.add_argument("--streams", default="1,100", help="concurrent streams per step, e.g. 1,16,100")
    parser.add_argument("--workers", type=int, default=1, help="gateway --workers (CPU: all its processes)")
    parser.add_argument("--store", action="store_true", help="the gateway writes its run store (the default)")
    args = parser.parse_args()
    cores: list[str | None] = list(args.pin.split(",")) if args.pin else [None, None, None]
    if len(cores) != 3:
        parser.error("--pin takes three cores: upstream,gateway,client")
    if cores[2] is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {int(cores[2])})
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    streams = [int(x) for x in args.streams.split(",")]
    asyncio.run(main(args.requests, args.tokens, cores, streams, args.workers, args.store))
