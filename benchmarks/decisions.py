"""Decisions from the fewest runs, against the scripted server with a known slowdown.

The server (``tokenpace.testing.scripted_server``, in a thread of this process) answers every
request after ``TTFT`` with ``TOKENS`` chunks; its speed wanders per run: before each run its
``Script`` is replaced by one whose TTFT and ITL are scaled by a factor uniform in 1 +- 3 % (the
``wander`` knob below), times the true slowdown of the side. Two experiments:

- ``repeat auto``: the baseline measured once as ``bench --repeat 3`` (a group), then the candidate
  run again only while the gate ``ttft.p50=5%`` is undecided (``run_until_decided``, always-valid
  intervals), at most ``--max-runs`` runs. Identical pairs (false alarms), +20 % (decided
  REGRESSED, runs needed), +8 % (decided or honestly undecided, never PASS).
- ``library``: ten earlier runs of the released server stored; then per trial one baseline run and
  one candidate run, ``check`` of the single runs (the noise learned from the library).

Each trial has its own store. Prints a markdown table (paste it in BENCHMARKS.md) and says how
loaded the host was.

    .venv/bin/python benchmarks/decisions.py [--pairs 40] [--regressions 20] [--small 10] [--requests 40]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import statistics
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from tokenpace.adapters.store import connect
from tokenpace.app.baseline.check import check
from tokenpace.app.bench.bench import BenchConfig
from tokenpace.app.jobs.bench_job import BenchOutcome, run_bench_job
from tokenpace.app.jobs.repeat_job import run_repeated_bench
from tokenpace.app.jobs.until_decided import run_until_decided
from tokenpace.app.run.outputs import RunOutputs
from tokenpace.core.analysis.comparison.gate import parse_thresholds
from tokenpace.core.workload.lengths import parse_length
from tokenpace.testing.scripted_server import Script, ScriptedServer

BASE = Script(ttft_s=0.05, itl_s=0.005, tokens=8)
GATE = parse_thresholds("ttft.p50=5%")
WANDER = 0.03  # each run's speed: uniform within +-3 % of the side's


@contextmanager
def served() -> Iterator[ScriptedServer]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    server = ScriptedServer(default=BASE)
    asyncio.run_coroutine_threadsafe(server.start(), loop).result(10)
    try:
        yield server
    finally:
        asyncio.run_coroutine_threadsafe(server.stop(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


class Bed:
    def __init__(self, srv: ScriptedServer, requests: int, rng: np.random.Generator) -> None:
        self.srv, self.requests, self.rng = srv, requests, rng

    def speed(self, slowdown: float) -> None:
        f = slowdown * self.rng.uniform(1 - WANDER, 1 + WANDER)
        self.srv.default = dataclasses.replace(BASE, ttft_s=BASE.ttft_s * f, itl_s=BASE.itl_s * f)

    def config(self, version: str) -> BenchConfig:
        return BenchConfig(url=self.srv.url, model="m", concurrency=4, requests=self.requests, timeout_s=10.0,
                           input_len=parse_length("16"), output_len=parse_length("8"),
                           labels={"version": version})  # fmt: skip

    def run(self, db: str, version: str, slowdown: float) -> str:
        self.speed(slowdown)
        out = run_bench_job(self.config(version), RunOutputs(write_files=False, store_url=db))
        return out.result.run_id

    def group(self, db: str, version: str, slowdown: float, k: int) -> str:
        self.speed(slowdown)
        g = run_repeated_bench(self.config(version), k, RunOutputs(write_files=False, store_url=db),
                               on_run=lambda _k, _o: self.speed(slowdown))  # fmt: skip
        return g.outcomes[0].result.run_id


def repeat_auto(bed: Bed, truth: float, trials: int, max_runs: int) -> dict[str, object]:
    outcomes, runs = [], []
    for _ in range(trials):
        with tempfile.TemporaryDirectory() as tmp:
            db = f"sqlite:///{Path(tmp) / 'runs.db'}"
            base = bed.group(db, "1", 1.0, 3)
            connect(db).set_baseline("prod", base)
            bed.speed(truth)

            def again(_k: int, _o: BenchOutcome) -> None:
                bed.speed(truth)

            done = run_until_decided(bed.config("2"), "prod", GATE, max_runs,
                                     RunOutputs(write_files=False, store_url=db), on_run=again)  # fmt: skip
            outcomes.append(done.outcome)
            runs.append(len(done.group.outcomes) if done.group else 0)
    return {"outcomes": outcomes, "runs": runs}


def library(bed: Bed, truth: float, trials: int, history: int = 10) -> dict[str, object]:
    outcomes = []
    with tempfile.TemporaryDirectory() as tmp:
        db = f"sqlite:///{Path(tmp) / 'runs.db'}"
        for _ in range(history):
            bed.run(db, "1", 1.0)
        for i in range(trials):
            base = bed.run(db, "1", 1.0)  # tonight's run of the release joins the library
            cand = bed.run(db, f"c{i}", truth)
            store = connect(db)
            store.set_baseline("prod", base)
            outcomes.append(check(store, "prod", GATE, candidate=cand, resamples=300).outcome)
            store.close()
    return {"outcomes": outcomes}


def _row(name: str, truth: float, res: dict[str, object]) -> str:
    outs = list(res["outcomes"])  # type: ignore[call-overload]
    n = len(outs)
    cells = [f"{outs.count(k)}/{n}" for k in ("regressed", "pass", "undecided")]
    runs = res.get("runs")
    med = f"{statistics.median(runs):g}" if runs else "1"  # type: ignore[arg-type]
    return f"| {name} | {truth - 1:+.0%} | {n} | {' | '.join(cells)} | {med} |"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=40)
    ap.add_argument("--regressions", type=int, default=20)
    ap.add_argument("--small", type=int, default=10)
    ap.add_argument("--requests", type=int, default=40)
    ap.add_argument("--max-runs", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    started, load0 = time.monotonic(), os.getloadavg()[0]
    rows = []
    with served() as srv:
        bed = Bed(srv, args.requests, np.random.default_rng(args.seed))
        for truth, trials in ((1.0, args.pairs), (1.2, args.regressions), (1.08, args.small)):
            rows.append(_row("repeat auto", truth, repeat_auto(bed, truth, trials, args.max_runs)))
            print(rows[-1], flush=True)
        for truth, trials in ((1.0, args.pairs), (1.2, args.regressions)):
            rows.append(_row("library (10 runs), 1 run a side", truth, library(bed, truth, trials)))
            print(rows[-1], flush=True)
    print()
    print("| experiment | true TTFT change | trials | REGRESSED | PASS | UNDECIDED | median candidate runs |")
    print("|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    took = time.monotonic() - started
    print(f"\n{took / 60:.1f} min; load average {load0:.1f} at start, {os.getloadavg()[0]:.1f} at end "
          f"on {os.cpu_count()} cores")  # fmt: skip


if __name__ == "__main__":
    main()
