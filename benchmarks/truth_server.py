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
from pathlib import Path

import orjson
import uvloop

from tokenpace.testing.scripted_server import Script, ScriptedServer

TRUTH_SCRIPT = Script(ttft_s=0.050, itl_s=0.010, tokens=64)
TINY_SCRIPT = Script(ttft_s=0.0, itl_s=0.0, tokens=1)


async def serve(truth_path: Path) -> None:
    # A listen backlog deep enough for 256+ connections opened at once.
    server = ScriptedServer(default=TRUTH_SCRIPT, scripts={"tiny": TINY_SCRIPT}, backlog=4096)
    await server.start()
    sys.stdout.write(f"{server.port}\n")
    sys.stdout.flush()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await server.stop()
    tmp = truth_path.with_name(truth_path.name + ".tmp")
    stats = server.stats
    tmp.write_bytes(orjson.dumps({"requests": stats.requests, "truth": stats.truth, "read": stats.read}))
    tmp.replace(truth_path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--truth", type=Path, required=True, help="where to write the truth JSON on SIGTERM")
    ap.add_argument("--cpu", type=int, default=0, help="pin to this core (-1: no pinning)")
    args = ap.parse_args()
    if args.cpu >= 0 and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {args.cpu})
    uvloop.run(serve(args.truth))


if __name__ == "__main__":
    main()
