"""The client's own TTFT tail against a bare asyncio client, over repeated interleaved runs.

    .venv/bin/python benchmarks/client_tail.py [--rounds 5] [--streams 16,64,256] [--seed 1]

One run's P99 rests on its few worst requests (the 2nd worst of 160 at 16 streams), so two runs of
the same client differ by 2-5x on this machine: no single pair of runs can say which client has the
smaller tail. This script runs tokenpace's real BenchRun and the raw asyncio client (benchmarks/
client_proc.py, each against a fresh truth server, pinned as in benchmarks/accuracy.py) ``--rounds``
times per load, alternating which goes first, pools each client's per-request errors and compares
the pooled P99s. The interval of the difference resamples whole runs (a cluster bootstrap), so the
noise *between* runs is counted, not only the noise between requests. Verdict per load: "below"
(tokenpace's P99 smaller: the interval's upper bound < 0), "above" (lower bound > 0), else
"no difference detected" with the interval, which says how large a difference the rounds could miss.

Its truth server (tokenpace's ScriptedServer, h11) reads a 256-request wave in 15-22 ms, and that
reading time is inside both clients' errors here; benchmarks/client_waves.py measures the same two
clients against a server that reads as fast as the machine allows (benchmarks/fast_truth_server.py),
so where the two scripts disagree, it is the server's share that this one counts and that one does not.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from accuracy import CLIENT_CPU, SERVER_CPU, Scenario, _cpus, run_client_raw

BOOTSTRAP = 4000
METRICS = (("ttft", "TTFT error (receive side)"), ("whole", "whole TTFT error (send + receive)"))


def cluster_p99_diff(
    a: list[np.ndarray], b: list[np.ndarray], rng: np.random.Generator
) -> tuple[float, float, float]:
    """P99 of pooled ``a`` minus P99 of pooled ``b``, and a 95 % interval resampling whole runs."""
    point = float(np.percentile(np.concatenate(a), 99) - np.percentile(np.concatenate(b), 99))
    diffs = np.empty(BOOTSTRAP)
    for i in range(BOOTSTRAP):
        pa = np.concatenate([a[k] for k in rng.integers(0, len(a), len(a))])
        pb = np.concatenate([b[k] for k in rng.integers(0, len(b), len(b))])
        diffs[i] = np.percentile(pa, 99) - np.percentile(pb, 99)
    lo, hi = np.percentile(diffs, [2.5, 97.5])
    return point, float(lo), float(hi)


def verdict(lo: float, hi: float) -> str:
    if hi < 0:
        return "below"
    if lo > 0:
        return "above"
    return "no difference detected"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--streams", default="16,64,256")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    if args.rounds < 2:
        sys.exit("client_tail.py: --rounds must be at least 2 (the interval resamples runs)")
    cpus = _cpus() if _cpus() != (-1, -1) else (SERVER_CPU, CLIENT_CPU)
    rng = np.random.default_rng(args.seed)
    load0 = os.getloadavg()[0]
    t0 = time.monotonic()
    pooled: dict[tuple[int, str, str], list[np.ndarray]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for rnd in range(args.rounds):
            for streams in (int(s) for s in args.streams.split(",")):
                sc = Scenario(
                    f"c{streams}",
                    f"closed, {streams} streams",
                    {16: 160, 64: 384}.get(streams, 4 * streams),
                    concurrency=streams,
                )
                order = ("tokenpace", "raw") if rnd % 2 == 0 else ("raw", "tokenpace")
                for kind in order:
                    joined = run_client_raw(kind, sc, Path(tmp), cpus)
                    for key, _ in METRICS:
                        pooled.setdefault((streams, kind, key), []).append(np.asarray(getattr(joined, key)))
            print(f"round {rnd + 1}/{args.rounds} done ({time.monotonic() - t0:.0f} s)", file=sys.stderr)
    print(
        f"{args.rounds} rounds, load average before {load0:.2f}, after {os.getloadavg()[0]:.2f}; "
        f"P99 of the pooled per-request errors (ms); the difference's 95 % interval resamples runs"
    )
    print("| streams | metric | tokenpace P99 | raw P99 | tokenpace - raw [95 % interval] | verdict |")
    print("|---|---|---|---|---|---|")
    for streams in (int(s) for s in args.streams.split(",")):
        for key, label in METRICS:
            a, b = pooled[(streams, "tokenpace", key)], pooled[(streams, "raw", key)]
            point, lo, hi = cluster_p99_diff(a, b, rng)
            tp, raw = np.percentile(np.concatenate(a), 99), np.percentile(np.concatenate(b), 99)
            print(
                f"| {streams} | {label} | {tp:.2f} | {raw:.2f} | {point:+.2f} [{lo:+.2f}, {hi:+.2f}] "
                f"| {verdict(lo, hi)} |"
            )


if __name__ == "__main__":
    main()
