"""Python calls per request on the closed loop's real path, counted (deterministic, unlike timings).

    python benchmarks/turnaround_calls.py [--streams 256] [--requests 1024] [--top 25] [--cli]

Starts benchmarks/truth_server.py (64 token chunks a request), runs ``BenchRun`` under uvloop as
``tokenpace bench`` does, and profiles only the load shape's ``drive`` (requests are prebuilt before
it). Two runs at the same concurrency: ``--streams`` requests (the first wave alone: connect and
send) and ``--requests`` (the first wave, then turnarounds: a request ends, its record is finished,
the user's next request goes out). Functions called at least ``PER_CHUNK`` times a request are the
per-chunk path and are counted apart; the rest, divided by the requests, is the per-request work:

    first wave  = rest(streams run) / streams
    turnaround  = (rest(requests run) - rest(streams run)) / (requests - streams)
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
from pathlib import Path

import uvloop

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from accuracy import TruthServer  # noqa: E402

PER_CHUNK = 16  # calls per request from which a function counts as per chunk (64 chunks a request)


def _profiled_run(url: str, streams: int, requests: int, cli: bool) -> tuple[pstats.Stats, int]:
    import io
    import tempfile

    from rich.console import Console

    from tokenpace.adapters.results import RecordWriter
    from tokenpace.app.bench import load_shapes
    from tokenpace.app.bench.bench import BenchConfig, BenchRun
    from tokenpace.cli.bench.run_view import BenchProgress
    from tokenpace.core.workload.lengths import parse_length

    prof = cProfile.Profile()
    drive = load_shapes.ClosedLoop.drive

    async def profiled_drive(self, ctx, t0, deadline_ns):  # type: ignore[no-untyped-def]
        prof.enable()
        try:
            await drive(self, ctx, t0, deadline_ns)
        finally:
            prof.disable()

    load_shapes.ClosedLoop.drive = profiled_drive  # type: ignore[method-assign]
    try:
        config = BenchConfig(
            url=url,
            model="m",
            concurrency=streams,
            requests=requests,
            timeout_s=120.0,
            input_len=parse_length("64"),
            output_len=parse_length("64"),
            request_id_prefix="req-",
        )

        # --cli: what ``tokenpace bench`` adds per record: the records file and the progress bar
        writer = RecordWriter(Path(tempfile.mkdtemp()) / "run.records.jsonl") if cli else None
        bar = BenchProgress(Console(file=io.StringIO(), force_terminal=True), quiet=False)

        def on_record(record):  # type: ignore[no-untyped-def]
            writer.write(record)  # type: ignore[union-attr]
            bar.record(record)

        async def main():  # type: ignore[no-untyped-def]
            if not cli:
                return await BenchRun(config).run()
            bar.started(requests, None)
            bar._ticker.cancel()  # redraws every 0.25 s: per second, not per request; left out
            try:
                return await BenchRun(config, on_record=on_record).run()
            finally:
                bar.finished()

        result = uvloop.run(main())
        if writer is not None:
            writer.close()
    finally:
        load_shapes.ClosedLoop.drive = drive  # type: ignore[method-assign]
    bad = [r for r in result.records if r.status.value != "ok"]
    if bad:
        raise SystemExit(f"{len(bad)} requests failed, e.g. {bad[0].error}")
    return pstats.Stats(prof), int(result.conditions["connections_opened"])


def _split(stats: pstats.Stats, requests: int) -> tuple[dict[str, int], dict[str, int]]:
    """(per-request functions, per-chunk functions): name -> calls."""
    per_request: dict[str, int] = {}
    per_chunk: dict[str, int] = {}
    for (path, line, name), (_, ncalls, *_rest) in stats.stats.items():  # type: ignore[attr-defined]
        key = f"{Path(path).name}:{line}({name})"
        (per_chunk if ncalls >= PER_CHUNK * requests else per_request)[key] = ncalls
    return per_request, per_chunk


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--streams", type=int, default=256)
    ap.add_argument("--requests", type=int, default=1024)
    ap.add_argument("--top", type=int, default=25, help="list this many turnaround functions")
    ap.add_argument("--cli", action="store_true", help="with the records file and progress bar, as bench")
    args = ap.parse_args()
    if args.requests <= args.streams:
        raise SystemExit("--requests must exceed --streams (the turnarounds are the difference)")
    counts = {}
    for n in (args.streams, args.requests):
        with TruthServer(Path("/tmp"), -1, f"turnaround-{n}") as server:
            stats, opened = _profiled_run(server.url, args.streams, n, args.cli)
            server.stop()
        counts[n] = _split(stats, n)
        print(f"{n} requests: {opened} connections opened")
    wave_req = counts[args.streams][0]
    all_req, all_chunk = counts[args.requests]
    turns = args.requests - args.streams
    wave = sum(wave_req.values()) / args.streams
    turnaround = (sum(all_req.values()) - sum(wave_req.values())) / turns
    chunk = sum(all_chunk.values()) / args.requests
    what = " (records file + progress bar, as tokenpace bench)" if args.cli else ""
    print(f"streams {args.streams}, requests {args.requests}{what}: Python calls per request")
    print(f"  first wave (connect + send + its end): {wave:.1f}")
    print(f"  turnaround (end -> next request sent): {turnaround:.1f}")
    print(f"  per-chunk path (functions >= {PER_CHUNK} calls a request), per request: {chunk:.1f}")
    _top("first-wave", {k: v / args.streams for k, v in wave_req.items()}, args.top)
    _top("turnaround", {k: (v - wave_req.get(k, 0)) / turns for k, v in all_req.items()}, args.top)


def _top(what: str, per_request: dict[str, float], top: int) -> None:
    print(f"top {top} {what} functions (calls per request):")
    for key, per in sorted(per_request.items(), key=lambda kv: -kv[1])[:top]:
        print(f"  {per:6.2f}  {key}")


if __name__ == "__main__":
    main()
