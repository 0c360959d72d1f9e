"""How requests of a real engine move together, and whether the intervals that count it hold.

Reads the recorded H200 ``transformers serve`` runs in ``tests/data/engines/h200`` (see its README).
Per run of at least ``--min-requests`` requests and per metric: the design effect tau and n_eff at
P50 and P95 (``evidence.dependence``: what the bootstrap resamples, and whether the run identified
its own dependence, i.e. the serial correlation's window closed within a quarter of the run).

An A/A check on real data: each run's first half against its second half (split at the median send
time; one engine, one load, so a steady run differs by noise alone). The 95 % interval of each
percentile's difference (``evidence.bootstrap.percentile_differences``) should hold 0; it is drawn
once in send order (dependence-aware) and once with the requests shuffled (what treating them as
independent gives). A half whose dependence the run did not identify is reported as such: the
dependence-aware method declines to give it an interval (undecided), and is not scored.

Then the same halves through ``compare``: as measured (A/A: nothing to decide), and with the
second half scaled by 1.3 and by 13 (a difference to decide beside the run's own drift).

    .venv/bin/python benchmarks/real_dependence.py [--min-requests 100]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from tokenpace.core.analysis.comparison.compare import compare_samples
from tokenpace.core.analysis.evidence.bootstrap import percentile_differences
from tokenpace.core.analysis.evidence.dependence import dependence
from tokenpace.core.analysis.evidence.runnoise import GroupNoise, noise_key
from tokenpace.core.analysis.evidence.samples import Samples, metric_samples
from tokenpace.core.record import RequestRecord

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "engines" / "h200"
QS = (50.0, 95.0)
METRICS = ("ttft", "tpot", "e2e")
SHIFTS = (1.0, 1.3, 13.0)
# Repeated runs that barely moved: the interval is the requests' noise alone (the strictest case).
QUIET = [GroupNoise(noise_key(m, q), 30, 1e-6, 0.01, 1.0) for m in METRICS for q in (50.0, 90.0, 95.0, 99.0)]


def _runs(min_requests: int) -> dict[str, list[RequestRecord]]:
    out = {}
    for f in sorted(DATA.glob("*.records.jsonl")):
        recs = [
            RequestRecord.from_dict(json.loads(line)) for line in f.read_text().splitlines() if line.strip()
        ]
        if len(recs) >= min_requests:
            out[f.name.removesuffix(".records.jsonl")] = recs
    return out


def _halves(s: Samples) -> tuple[Samples, Samples]:
    groups = s.in_send_order()
    mid = len(groups) // 2
    return Samples(groups[:mid]), Samples(groups[mid:])


def _shuffled(s: Samples, rng: np.random.Generator) -> Samples:
    return Samples([s.groups[i] for i in rng.permutation(len(s.groups))])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--min-requests", type=int, default=100)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    print(
        "| run | metric | n | tau P50 / P95 | n_eff P50 / P95 | resampled by | identified P50 / P95 "
        "| A/A holds 0, independent P50 / P95 | A/A holds 0, dependence-aware P50 / P95 |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    score = np.zeros((2, 2), dtype=int)  # [independent, dependent] x [held 0, checked]
    unfit = 0
    for name, recs in _runs(args.min_requests).items():
        for m in METRICS:
            s = metric_samples(recs, m)
            plan = dependence(s, QS)
            known = plan.identified if plan.identified is not None else np.ones(len(QS), dtype=bool)
            first, second = _halves(s)
            halves_known = [dependence(h, QS).identified for h in (first, second)]
            dep = percentile_differences(first, second, QS, seed=1)
            iid = percentile_differences(_shuffled(first, rng), _shuffled(second, rng), QS, seed=1)
            cells = [[], []]
            for j, q in enumerate(QS):
                ok_iid = iid[q].lo <= 0 <= iid[q].hi
                score[0] += (ok_iid, 1)
                cells[0].append("yes" if ok_iid else "**no**")
                if not known[j] or not all(k is None or k[j] for k in halves_known):
                    unfit += 1
                    cells[1].append("not identified")
                    continue
                ok = dep[q].lo <= 0 <= dep[q].hi
                score[1] += (ok, 1)
                cells[1].append("yes" if ok else "**no**")
            print(
                f"| {name} | {m} | {s.n} | {plan.taus[0]:.1f} / {plan.taus[1]:.1f} "
                f"| {plan.n_eff[0]:.0f} / {plan.n_eff[1]:.0f} | {plan.by} "
                f"| {'yes' if known[0] else 'no'} / {'yes' if known[1] else 'no'} "
                f"| {' / '.join(cells[0])} | {' / '.join(cells[1])} |"
            )
    print()
    print(
        f"A/A intervals holding 0: independent {score[0, 0]}/{score[0, 1]}; dependence-aware "
        f"{score[1, 0]}/{score[1, 1]}, and {unfit} declined (dependence not identified)"
    )
    print()
    through_compare(_runs(args.min_requests))


def through_compare(runs: dict[str, list[RequestRecord]]) -> None:
    """Half against half through ``compare_samples`` (a quiet learned noise: the requests' noise
    alone decides), the second half as measured and scaled by 1.3 and by 13: per run and metric,
    the verdicts of P50 / P95 / P99 (s slower, f faster, n negligible, u undecided, - too few)."""
    print("| run | metric | A/A | second half x 1.3 | second half x 13 |")
    print("|---|---|---|---|---|")
    short = {"slower": "s", "faster": "f", "negligible": "n", "undecided": "u", "too few samples": "-"}
    totals: dict[float, dict[str, int]] = {f: {} for f in SHIFTS}
    for name, recs in runs.items():
        for m in METRICS:
            first, second = _halves(metric_samples(recs, m))
            cells = []
            for f in SHIFTS:
                scaled = Samples([g * f for g in second.groups])
                rows = compare_samples(m, [first], [scaled], learned=QUIET, resamples=300).rows
                for r in rows:
                    totals[f][r.verdict.value] = totals[f].get(r.verdict.value, 0) + 1
                cells.append(" / ".join(short[r.verdict.value] for r in rows))
            print(f"| {name} | {m} | {' | '.join(cells)} |")
    print()
    for f, counts in totals.items():
        print(f"x {f:g}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))


if __name__ == "__main__":
    main()
