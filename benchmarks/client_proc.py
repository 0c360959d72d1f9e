"""One client run in its own process, pinned to one core, for benchmarks/accuracy.py.

    python benchmarks/client_proc.py --kind tokenpace|raw|aiohttp --url URL \
        (--concurrency N | --rate R) --requests N --out OUT.json [--cpu 1]

``tokenpace`` drives tokenpace's real code path (``BenchRun`` under ``uvloop.run``, exactly as
``tokenpace bench`` does, minus the progress bar and record file); the others are the reference
clients in refclients.py. Writes the records (perf_counter_ns timestamps), the process CPU time
and wall time of the run itself, and the process's max RSS.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
from pathlib import Path
from time import perf_counter

import orjson
import uvloop

sys.path.insert(0, str(Path(__file__).resolve().parent))


def _cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_tokenpace(args: argparse.Namespace) -> dict:
    from tokenpace.app.bench.bench import BenchConfig, BenchRun
    from tokenpace.core.workload.lengths import parse_length

    config = BenchConfig(
        url=args.url,
        model="m",
        concurrency=args.concurrency,
        rate=args.rate,
        arrival="poisson",
        requests=args.requests,
        timeout_s=120.0,
        input_len=parse_length("64"),
        output_len=parse_length("64"),
        request_id_prefix=args.prefix,
    )

    measure = BenchRun._measure
    marks: dict[str, float] = {}

    async def timed(self, *a, **k):  # the load itself: its end is where the analysis begins
        out = await measure(self, *a, **k)
        marks["load_end"] = _cpu_s()
        return out

    BenchRun._measure = timed  # type: ignore[method-assign]

    async def main():
        return await BenchRun(config).run()

    cpu0, wall0 = _cpu_s(), perf_counter()
    result = uvloop.run(main())
    cpu, wall = _cpu_s() - cpu0, perf_counter() - wall0
    load_cpu = marks.get("load_end", cpu0 + cpu) - cpu0
    rss = _rss_mb()
    records = [
        {
            "request_id": r.request_id,
            "scheduled_ns": r.scheduled_ns,
            "dispatched_ns": r.dispatched_ns,
            "sent_ns": r.sent_ns,
            "connect_ns": r.connect_ns,
            "first_token_ns": r.first_token_ns,
            "token_ns": r.token_ns,
            "end_ns": r.end_ns,
            "status": r.status.value,
            "error": r.error,
        }
        for r in result.records
    ]
    summary = result.summary.to_dict()
    return {
        "cpu_s": cpu,
        "load_cpu_s": load_cpu,  # up to the last request's end: the run without its analysis
        "wall_s": wall,
        "max_rss_mb": rss,
        "records": records,
        "valid": result.health.valid,
        "invalid_reasons": result.health.invalid_reasons,
        "health": result.health.to_dict(),
        "reported": {k: summary.get(k) for k in ("ttft_ms", "itl_ms", "tpot_ms", "output_token_throughput")},
        "stop_reason": result.stop_reason,
    }


def run_reference(args: argparse.Namespace) -> dict:
    from urllib.parse import urlsplit

    import refclients

    parts = urlsplit(args.url)
    cls = refclients.RawClient if args.kind == "raw" else refclients.AiohttpClient

    async def main():
        client = cls(parts.hostname, parts.port, "m")
        probe = refclients.LoopLagProbe()
        probe.start()
        try:
            recs = await refclients.drive(
                client.request, args.prefix, args.requests, args.concurrency, args.rate
            )
        finally:
            await probe.stop()
            await client.close()
        return recs, probe.lags_ms

    cpu0, wall0 = _cpu_s(), perf_counter()
    recs, lags = uvloop.run(main())
    cpu, wall = _cpu_s() - cpu0, perf_counter() - wall0
    return {
        "cpu_s": cpu,
        "load_cpu_s": cpu,  # a reference client does no analysis
        "wall_s": wall,
        "max_rss_mb": _rss_mb(),
        "records": [r.to_dict() for r in recs],
        "loop_lag_ms": lags,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--kind", choices=("tokenpace", "raw", "aiohttp"), required=True)
    ap.add_argument("--url", required=True)
    ap.add_argument("--concurrency", type=int)
    ap.add_argument("--rate", type=float)
    ap.add_argument("--requests", type=int, required=True)
    ap.add_argument("--prefix", default="req-")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--cpu", type=int, default=1, help="pin to this core (-1: no pinning)")
    ap.add_argument("--profile", type=Path, help="write cProfile stats of the run here (slows it)")
    args = ap.parse_args()
    if args.cpu >= 0 and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {args.cpu})
    run = run_tokenpace if args.kind == "tokenpace" else run_reference
    if args.profile:
        import cProfile

        with cProfile.Profile() as prof:
            out = run(args)
        prof.dump_stats(args.profile)
    else:
        out = run(args)
    out["kind"] = args.kind
    args.out.write_bytes(orjson.dumps(out, option=orjson.OPT_SERIALIZE_NUMPY))


if __name__ == "__main__":
    main()
