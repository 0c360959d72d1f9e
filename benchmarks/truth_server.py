"""The scripted server whose truth is known, in its own process, for benchmarks/accuracy.py.

    python benchmarks/truth_server.py --truth OUT.json [--cpu 0]

Prints its port on the first line of stdout, serves ``Script(ttft_s=0.050, itl_s=0.010,
tokens=64)`` to every model (and a one-token instant answer to model ``tiny``, for start-up
timing) under uvloop, and on SIGTERM writes ``stats.truth`` (request id -> the
``perf_counter_ns()`` at which each token chunk was written) and ``stats.read`` (request id -> when
its request had been read) to ``--truth`` and exits.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import orjson
import uvloop

from tokenpace.testing.scripted_server import Script, ScriptedServer

TRUTH_SCRIPT = Script(ttft_s=0.050, itl_s=0.010, tokens=64)
TINY_SCRIPT = Script(ttft_s=0.0, itl_s=0.0, tokens=1)


async def until_signalled(port: int) -> None:
    """Say ``port`` on the first line of stdout (the benchmark reads it), then wait for SIGTERM or
    SIGINT."""
    sys.stdout.write(f"{port}\n")
    sys.stdout.flush()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()


def write_truth(path: Path, requests: int, truth: dict[str, list[int]], read: dict[str, int]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(orjson.dumps({"requests": requests, "truth": truth, "read": read}))
    tmp.replace(path)  # the benchmark never reads half a file


def run(serve: Callable[[Path], Awaitable[None]], description: str | None) -> None:
    """A truth server's command line: ``--truth OUT.json [--cpu N]``, pinned, under uvloop."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--truth", type=Path, required=True, help="where to write the truth JSON on SIGTERM")
    ap.add_argument("--cpu", type=int, default=0, help="pin to this core (-1: no pinning)")
    args = ap.parse_args()
    if args.cpu >= 0 and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {args.cpu})
    uvloop.run(serve(args.truth))


async def serve(truth_path: Path) -> None:
    # A listen backlog deep enough for 256+ connections opened at once.
    server = ScriptedServer(default=TRUTH_SCRIPT, scripts={"tiny": TINY_SCRIPT}, backlog=4096)
    await server.start()
    await until_signalled(server.port)
    await server.stop()
    stats = server.stats
    write_truth(truth_path, stats.requests, stats.truth, stats.read)


if __name__ == "__main__":
    run(serve, __doc__)
