"""Intervals of percentiles when neighbouring requests move together: coverage and width.

Synthetic latency series of known truth (``tokenpace.testing.dependent_series``: AR(1) with rho 0,
0.5 and 0.9, periodic queue bursts, host stalls), at n = 200 and 1,000 requests. For P50 and P95,
over ``--trials`` seeded series each:

- *independent*: the order-statistic interval of ``core.stats.percentile_cis`` (every request
  counted as independent), and the plain bootstrap's normal interval (percentile +- 1.96 SE);
- *dependent*: ``core.stats.ordered_percentile_cis`` (the interval at n_eff, what SLO steps, select
  and sweep steps judge on), and the block bootstrap of ``evidence.bootstrap.resample_percentiles``
  (what compare, check and arms guards take their SE from), each with a side its n_eff cannot bound
  open (``core.stats.open_sides``; an open side covers the truth on that side; widths are of the
  intervals bounded on both sides, with the share open beside them);
- how often the percentile is decided (at least 5 effective observations beyond it) and the
  coverage among those decided, for both (compare calls a percentile with fewer undecided).

A second table: requests of 20 or 100 users with a per-user latency factor
(``dependent_series.per_user``), the bootstrap over requests against the one that sees each
request's user (``evidence.dependence``: whole users resampled when their design effect is the
larger one), with the mean n_eff and how often users were chosen.

``--few-users``: instead, 3, 5 and 8 users with a factor exp(0.3 u) each: the coverage of each
percentile (the bootstrap over requests, and the one seeing users, at +- 1.96 SE), and of a true
zero change between two arms of their own users each (``compare_samples`` as the gateway's arms:
one window), with how often the change was decided either way (a wrong-way verdict).

``--timing``: the CPU time (best of 3; steadier than the wall clock on a busy host) of
``compare_records`` on two 10,000-request runs (independent, and AR(1) rho 0.9) and of
``summarize`` of one; run it under each tree to compare before and after.

    .venv/bin/python benchmarks/dependent_intervals.py [--trials 300] [--resamples 200] [--timing]
    .venv/bin/python benchmarks/dependent_intervals.py --few-users [--trials 150]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np

from tokenpace.core.analysis.evidence.bootstrap import resample_percentiles
from tokenpace.core.analysis.evidence.dependence import dependence
from tokenpace.core.analysis.evidence.samples import Samples
from tokenpace.core.stats import enough_samples, open_sides, ordered_percentile_cis, percentile_cis
from tokenpace.testing import dependent_series as ds

QS = (50.0, 95.0)
Z = 1.96

Series = Callable[[np.random.Generator, int, int], np.ndarray]
CASES: list[tuple[str, Series, Callable[[float], float]]] = [
    ("AR(1) rho 0", lambda g, t, n: ds.ar1(g, t, n, 0.0), ds.ar1_truth),
    ("AR(1) rho 0.5", lambda g, t, n: ds.ar1(g, t, n, 0.5), ds.ar1_truth),
    ("AR(1) rho 0.9", lambda g, t, n: ds.ar1(g, t, n, 0.9), ds.ar1_truth),
    ("queue bursts", ds.bursts, ds.bursts_truth),
    ("stalls", ds.stalls, ds.stalls_truth),
]


def _flat(x: np.ndarray) -> Samples:
    return Samples([np.array([v]) for v in x])


def _case(series: np.ndarray, truth: list[float], resamples: int, rng: np.random.Generator) -> list[str]:
    trials, n = series.shape
    hits = np.zeros((4, len(QS)))
    width = np.zeros((4, len(QS)))
    bounded = np.zeros((4, len(QS)))  # intervals with both sides bounded (the widths' count)
    decided = np.zeros(len(QS))
    decided_hits = np.zeros(len(QS))
    block_decided, block_hits = np.zeros(len(QS)), np.zeros(len(QS))
    for x in series:
        dep, n_eff = ordered_percentile_cis(x, QS)
        plain = percentile_cis(np.sort(x), QS)
        plan = dependence(_flat(x), QS)
        block = resample_percentiles(_flat(x), QS, resamples, rng, plan)
        iid = np.percentile(x[rng.integers(0, n, (resamples, n))], QS, axis=1).T
        point = np.percentile(x, QS)
        for j, t in enumerate(truth):
            # the block bootstrap's side its own n_eff cannot bound is open, as compare leaves it
            below, above = open_sides(float(n), float(plan.n_eff[j]), QS[j] / 100, 0.025)
            sd = block[:, j].std(ddof=1)
            ivs = [
                plain[j],
                (point[j] - Z * iid[:, j].std(ddof=1), point[j] + Z * iid[:, j].std(ddof=1)),
                dep[j],
                (-np.inf if below else point[j] - Z * sd, np.inf if above else point[j] + Z * sd),
            ]
            for k, (lo, hi) in enumerate(ivs):
                hits[k, j] += lo <= t <= hi  # an open side covers the truth on that side
                if np.isfinite(hi - lo):
                    bounded[k, j] += 1
                    width[k, j] += (hi - lo) / t
            if enough_samples(n_eff[j], QS[j]):
                decided[j] += 1
                decided_hits[j] += dep[j][0] <= t <= dep[j][1]
            if enough_samples(float(plan.n_eff[j]), QS[j]):  # what compare decides on (else undecided)
                block_decided[j] += 1
                block_hits[j] += ivs[3][0] <= t <= ivs[3][1]
    rows = []
    for j, q in enumerate(QS):
        cov = [_cell(hits[k, j], width[k, j], bounded[k, j], trials) for k in range(4)]
        cond = f"{decided_hits[j] / decided[j]:.0%}" if decided[j] else "-"
        block_cond = f"{block_hits[j] / block_decided[j]:.0%}" if block_decided[j] else "-"
        rows.append(f"P{q:g} | " + " | ".join(cov) + f" | {decided[j] / trials:.0%} | {cond} | {block_cond}")
    return rows


def _cell(hits: float, width: float, bounded: float, trials: int) -> str:
    """Coverage (mean width of the bounded intervals; the share with a side open, where any)."""
    shown = f"{width / bounded:.1%}" if bounded else "-"
    opened = f"; {(trials - bounded) / trials:.0%} open" if bounded < trials else ""
    return f"{hits / trials:.0%} ({shown}{opened})"


def coverage(trials: int, resamples: int) -> None:
    print(
        "| series | n | percentile | order-statistic, independent | bootstrap, independent "
        "| order-statistic at n_eff | block bootstrap | decided | coverage when decided "
        "| block bootstrap when decided |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for seed, (name, make, truth_of) in enumerate(CASES):
        for n in (200, 1000):
            rng = np.random.default_rng([seed, n])
            series = make(rng, trials, n)
            for row in _case(series, [truth_of(q) for q in QS], resamples, rng):
                print(f"| {name} | {n} | {row} |")


def users(trials: int, resamples: int) -> None:
    print("| users | n | percentile | bootstrap over requests | bootstrap seeing users | n_eff | by user |")
    print("|---|---|---|---|---|---|---|")
    for count in (20, 100):
        n = 1000
        rng = np.random.default_rng([9, count])
        series, who = ds.per_user(rng, trials, n, count)
        truth = [ds.per_user_truth(q) for q in QS]
        hits, width, n_eff = np.zeros((2, len(QS))), np.zeros((2, len(QS))), np.zeros(len(QS))
        by_user = 0
        for x, w in zip(series, who, strict=True):
            plain = Samples([np.array([v]) for v in x])
            keyed = Samples(plain.groups, None, [f"user:{u}" for u in w])
            plan = dependence(keyed, QS)
            by_user += plan.by == "user"
            n_eff += plan.n_eff
            point = np.percentile(x, QS)
            for k, s in enumerate((plain, keyed)):
                sd = resample_percentiles(s, QS, resamples, rng).std(axis=0, ddof=1)
                for j, t in enumerate(truth):
                    hits[k, j] += point[j] - Z * sd[j] <= t <= point[j] + Z * sd[j]
                    width[k, j] += 2 * Z * sd[j] / t
        for j, q in enumerate(QS):
            cov = [f"{hits[k, j] / trials:.0%} ({width[k, j] / trials:.1%})" for k in range(2)]
            print(
                f"| {count} | {n} | P{q:g} | {' | '.join(cov)} | {n_eff[j] / trials:.0f} "
                f"| {by_user / trials:.0%} |"
            )


def few_users(trials: int, resamples: int, n: int = 1000, spread: float = 0.3) -> None:
    from tokenpace.core.analysis.comparison.compare import compare_samples
    from tokenpace.core.analysis.evidence.verdict import Verdict

    print("| users | n | percentile | bootstrap over requests | bootstrap seeing users | median n_eff "
          "| zero change covered (two arms) | wrong-way |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    truth = [ds.per_user_truth(q, spread) for q in QS]
    for count in (3, 5, 8):
        rng = np.random.default_rng([48, count])
        series, who = ds.per_user(rng, trials, n, count, spread)
        hits, n_eff = np.zeros((2, len(QS))), []
        zero, wrong = np.zeros(len(QS)), np.zeros(len(QS))
        for i, (x, w) in enumerate(zip(series, who, strict=True)):
            keyed = Samples([np.array([v]) for v in x], None, [f"user:{u}" for u in w])
            n_eff.append(dependence(keyed, QS).n_eff)
            point = np.percentile(x, QS)
            for k, s in enumerate((Samples(keyed.groups), keyed)):
                sd = resample_percentiles(s, QS, resamples, rng).std(axis=0, ddof=1)
                hits[k] += np.abs(point - np.array(truth)) <= Z * sd
            if i % 2:  # this run and the one before: two arms of their own users, truly equal
                prev = Samples(
                    [np.array([v]) for v in series[i - 1]], None, [f"user:a{u}" for u in who[i - 1]]
                )
                m = compare_samples(
                    "ttft", [prev], [keyed], QS, resamples=resamples, seed=i, same_window=True
                )
                for j, row in enumerate(m.rows):
                    lo, hi = row.rel_ci or (None, None)
                    zero[j] += lo is not None and hi is not None and lo <= 0 <= hi
                    wrong[j] += row.verdict in (Verdict.SLOWER, Verdict.FASTER)
        pairs = trials // 2
        mid = np.median(n_eff, axis=0)
        for j, q in enumerate(QS):
            cov = " | ".join(f"{hits[k, j] / trials:.0%}" for k in range(2))
            print(f"| {count} | {n} | P{q:g} | {cov} | {mid[j]:.0f} | {zero[j] / pairs:.0%} "
                  f"| {wrong[j]:.0f} of {pairs} |")  # fmt: skip


def timing() -> None:
    from tokenpace.core.analysis.comparison.compare import compare_records
    from tokenpace.core.metrics import summarize
    from tokenpace.core.record import RequestRecord, Status

    def run(latencies: np.ndarray) -> list[RequestRecord]:
        out = []
        for i, ms in enumerate(latencies):
            r = RequestRecord(request_id=str(i), sent_ns=i * 10_000_000)
            r.status = Status.OK
            r.first_token_ns = r.sent_ns + int(ms * 1e6)
            r.token_ns = [r.first_token_ns + k * 20_000_000 for k in range(5)]
            r.end_ns = r.token_ns[-1]
            r.output_tokens_counted = 5
            out.append(r)
        return out

    rng = np.random.default_rng(1)
    for name, rho in (("independent", 0.0), ("AR(1) rho 0.9", 0.9)):
        a, b = run(ds.ar1(rng, 1, 10_000, rho)[0]), run(ds.ar1(rng, 1, 10_000, rho)[0])
        best_c = best_s = float("inf")
        for _ in range(3):
            t0 = time.process_time()
            compare_records(a, b)
            t1 = time.process_time()
            summarize(a)
            t2 = time.process_time()
            best_c, best_s = min(best_c, t1 - t0), min(best_s, t2 - t1)
        print(f"| {name} | 10,000 + 10,000 | {best_c:.2f} s | {best_s:.2f} s |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=300)
    ap.add_argument("--resamples", type=int, default=200)
    ap.add_argument("--timing", action="store_true", help="time compare and summarize instead")
    ap.add_argument("--few-users", action="store_true", help="3, 5 and 8 users instead")
    args = ap.parse_args()
    if args.timing:
        timing()
    elif args.few_users:
        few_users(args.trials, args.resamples)
    else:
        coverage(args.trials, args.resamples)
        print()
        users(args.trials, args.resamples)


if __name__ == "__main__":
    main()
