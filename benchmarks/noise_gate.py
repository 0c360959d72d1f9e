"""The gate against a library recorded on a quiet host, candidates measured on a busy one.

The scripted server (``decisions.served``) answers after ``BASE``; before every run its speed is
scaled by a factor uniform in 1 +- ``QUIET`` (library nights: SD 2.9 %) or 1 +- ``BUSY`` (tonight:
SD 8.7 %), times the side's true slowdown. The host condition each run records is set by the
script (``health.read_host_load``: 0.2 per core on library nights, 1.5 tonight; the loop's own
stalls on this shared host are left out of the class, since they are the same every night here):
the engine's noise and the host's reading move together, as they do when the engine shares a host.

- ``check``: ten library runs of the release (quiet), the baseline the newest of them; per trial one
  candidate run on the busy host, ``check`` of that single run (``ttft.p50=5%``). True +8 % (never
  PASS) and +0 % (false alarms: REGRESSED).
- ``before``: the same ``check`` trials judged as before this gate (``--before``): the library's
  noise pooled as a point estimate, whatever the host's condition (the two functions patched).
- ``until``: per trial one baseline run (quiet) and one candidate run (busy) stored, then
  ``check --until-decided`` (``check_until_decided``, at most 6 candidate runs) at +20 %: decided
  REGRESSED, or undecided with "the baseline side limits the decision" (stopped at once where no
  number of candidate runs would decide).

    .venv/bin/python benchmarks/noise_gate.py [--trials 20] [--until 10] [--requests 40]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
from decisions import BASE, GATE, Bed, served

from tokenpace.adapters.store import connect
from tokenpace.app.baseline import compare as baseline_compare
from tokenpace.app.baseline.check import check
from tokenpace.app.jobs.check_until import check_until_decided
from tokenpace.app.watch import health
from tokenpace.core.analysis.comparison import compare as comparison_compare
from tokenpace.core.analysis.evidence import gate_noise
from tokenpace.core.analysis.evidence.runnoise import pool

QUIET, BUSY = 0.05, 0.15  # per-run speed: uniform within +-5 % (SD 2.9 %) or +-15 % (SD 8.7 %)
LOADS = {QUIET: 0.2, BUSY: 1.5}  # the host's load average per core the runs record


class NoisyBed(Bed):
    wander = QUIET

    def speed(self, slowdown: float) -> None:
        f = slowdown * self.rng.uniform(1 - self.wander, 1 + self.wander)
        self.srv.default = dataclasses.replace(BASE, ttft_s=BASE.ttft_s * f, itl_s=BASE.itl_s * f)

    def host(self, wander: float) -> None:
        self.wander = wander
        health.read_host_load = lambda: LOADS[wander]


def _check(bed: NoisyBed, truth: float, trials: int, history: int = 10) -> list[str]:
    outcomes = []
    with tempfile.TemporaryDirectory() as tmp:
        db = f"sqlite:///{Path(tmp) / 'runs.db'}"
        bed.host(QUIET)
        base = [bed.run(db, "1", 1.0) for _ in range(history)][-1]
        bed.host(BUSY)
        for i in range(trials):
            cand = bed.run(db, f"c{i}", truth)
            store = connect(db)
            store.set_baseline("prod", base)
            report = check(store, "prod", GATE, candidate=cand, resamples=300, allow_invalid=True)
            outcomes.append(report.outcome)
            store.close()
    return outcomes


def _valid_run(bed: NoisyBed, db: str, version: str, truth: float, tries: int = 5) -> str:
    """A run the client kept up in (this shared host stalls it now and then): ``--until-decided``
    judges no NOT VALID stored run."""
    for _ in range(tries):
        run_id = bed.run(db, version, truth)
        store = connect(db)
        run = store.get_run(run_id)
        store.close()
        if run is not None and run.valid:
            return run_id
    raise SystemExit(f"no valid run in {tries} tries: the host is too busy for this benchmark")


def _until(bed: NoisyBed, truth: float, trials: int) -> list[str]:
    outcomes = []
    for _ in range(trials):
        with tempfile.TemporaryDirectory() as tmp:
            db = f"sqlite:///{Path(tmp) / 'runs.db'}"
            bed.host(QUIET)
            base = _valid_run(bed, db, "1", 1.0)
            bed.host(BUSY)
            cand = _valid_run(bed, db, "2", truth)
            store = connect(db)
            store.set_baseline("prod", base)
            store.close()
            bed.speed(truth)
            got = check_until_decided(db, "prod", GATE, cand, max_runs=6,
                                      on_run=lambda _k, _o: bed.speed(truth))  # fmt: skip
            done = got.done
            limits = done.outcome == "undecided" and done.baseline_limits
            outcomes.append(f"{'baseline limits' if limits else done.outcome} ({got.runs_added} added)")
    return outcomes


@contextmanager
def _as_before() -> Iterator[None]:
    """The gate before: the library's pooled point estimate, every host's runs counted."""
    was_host, was_noise = baseline_compare.runs_host, comparison_compare.gate_noise
    baseline_compare.runs_host = lambda _store, _ids: None
    comparison_compare.gate_noise = lambda key, learned, own, _host: pool(key, [*learned, *own])
    try:
        yield
    finally:
        baseline_compare.runs_host, comparison_compare.gate_noise = was_host, was_noise


def _row(name: str, truth: float, outs: list[str]) -> str:
    n = len(outs)
    kinds = (("regressed",), ("pass",), ("undecided", "baseline limits"))
    cells = [f"{sum(o.startswith(k) for o in outs)}/{n}" for k in kinds]
    limited = sum(o.startswith("baseline limits") for o in outs)
    return f"| {name} | {truth - 1:+.0%} | {n} | {' | '.join(cells)} | {limited}/{n} |"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--until", type=int, default=10)
    ap.add_argument("--requests", type=int, default=40)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--before", action="store_true", help="also judge the check trials as before")
    args = ap.parse_args()
    # the class from the load reading the script sets (this host's own stalls are the same each night)
    health.host_class = lambda load, _stalls: gate_noise.host_class(load, 0.0)
    started, load0 = time.monotonic(), os.getloadavg()[0]
    rows = []
    with served() as srv:
        bed = NoisyBed(srv, args.requests, np.random.default_rng(args.seed))
        for truth in (1.08, 1.0):
            outs = _check(bed, truth, args.trials)
            rows.append(_row("check, 1 candidate run (library: 10 quiet runs)", truth, outs))
            print(rows[-1], flush=True)
        if args.before:
            with _as_before():
                for truth in (1.08, 1.0):
                    outs = _check(bed, truth, args.trials)
                    rows.append(_row("as before: point estimate, any host", truth, outs))
                    print(rows[-1], flush=True)
        outs = _until(bed, 1.2, args.until)
        rows.append(_row("check --until-decided, 1 baseline run", 1.2, outs))
        print(rows[-1], "|", ", ".join(outs), flush=True)
    print()
    print(
        "| experiment | true TTFT change | trials | REGRESSED | PASS | UNDECIDED "
        "| says: the baseline side limits |"
    )
    print("|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    took = time.monotonic() - started
    print(f"\n{took / 60:.1f} min; load average {load0:.1f} at start, {os.getloadavg()[0]:.1f} at end "
          f"on {os.cpu_count()} cores")  # fmt: skip


if __name__ == "__main__":
    main()
