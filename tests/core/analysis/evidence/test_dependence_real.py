"""Dependence on a real engine's records (tests/data/engines/h200: `transformers serve` with
continuous batching on an H200, see its README): its requests queue together, the intervals widen
accordingly, and where a run's requests moved together over much of the run the verdict says so
(undecided) rather than predict. The A/A check: a run's first half against its second half (one
engine, one load) is never called faster or slower, where counting the requests as independent is."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from tokenpace.core.analysis.comparison.compare import MetricResult, compare_samples
from tokenpace.core.analysis.evidence.dependence import dependence
from tokenpace.core.analysis.evidence.runnoise import GroupNoise, noise_key
from tokenpace.core.analysis.evidence.samples import METRICS, Samples, metric_samples
from tokenpace.core.analysis.evidence.verdict import Verdict
from tokenpace.core.record import RequestRecord
from tokenpace.core.stats import ordered_percentile_cis, percentile_cis

DATA = Path(__file__).resolve().parents[3] / "data" / "engines" / "h200"
QS = [50.0, 95.0]
# Repeated runs that barely moved: the interval is the requests' noise alone (the strictest case).
QUIET = [GroupNoise(noise_key(m, q), 30, 1e-6, 0.01, 1.0) for m in METRICS for q in (50.0, 90.0, 95.0, 99.0)]


def _samples(run: str, metric: str) -> Samples:
    lines = (DATA / f"{run}.records.jsonl").read_text().splitlines()
    return metric_samples([RequestRecord.from_dict(json.loads(x)) for x in lines if x.strip()], metric)


def _halves(s: Samples, shuffle: np.random.Generator | None = None) -> tuple[Samples, Samples]:
    """The first and second half in send order; ``shuffle``: each half's order lost (its requests
    counted as independent)."""
    groups = s.in_send_order()
    mid = len(groups) // 2
    halves = groups[:mid], groups[mid:]
    if shuffle is not None:
        halves = tuple([h[i] for i in shuffle.permutation(len(h))] for h in halves)  # type: ignore[assignment]
    return Samples(halves[0]), Samples(halves[1])


def _compare(metric: str, first: Samples, second: Samples) -> MetricResult:
    return compare_samples(metric, [first], [second], learned=QUIET, resamples=300)


def test_requests_at_a_steady_poisson_load_queue_together_and_the_interval_widens() -> None:
    s = _samples("rate", "ttft")
    plan = dependence(s, QS)
    assert plan.by == "time blocks" and plan.identified is not None and plan.identified.all()
    assert np.all(plan.taus > 1.5) and np.all(plan.n_eff < s.n / 1.5)
    ordered = np.concatenate(s.in_send_order())
    ((lo, hi),), _ = ordered_percentile_cis(ordered, [50.0])
    plain = percentile_cis(np.sort(ordered), [50.0])[0]
    assert hi - lo > 1.2 * (plain[1] - plain[0])


def test_a_closed_loop_of_128_users_moves_together_over_the_whole_run() -> None:
    for metric in ("tpot", "e2e"):
        plan = dependence(_samples("held.step02", metric), QS)
        assert plan.identified is not None and not plan.identified.any()  # no steady state inside
        assert plan.n_eff[0] < 10


def test_half_against_half_of_one_real_run_is_never_called_faster_or_slower() -> None:
    decided, wrong_if_independent = 0, 0
    rng = np.random.default_rng(0)
    for run in ("held.step02", "conc.step04", "rate"):
        for metric in ("ttft", "tpot", "e2e"):
            s = _samples(run, metric)
            aware = _compare(metric, *_halves(s))
            naive = _compare(metric, *_halves(s, rng))
            for row, flat in zip(aware.rows, naive.rows, strict=True):
                decided += row.verdict in (Verdict.SLOWER, Verdict.FASTER)
                wrong_if_independent += flat.verdict in (Verdict.SLOWER, Verdict.FASTER)
                if row.dependence_note:
                    assert row.verdict is Verdict.UNDECIDED and "would decide" in row.dependence_note
    assert decided == 0
    assert wrong_if_independent >= 2, wrong_if_independent  # as independent, the halves "differ"


def test_an_undecided_verdict_says_the_requests_moved_together() -> None:
    first, second = _halves(_samples("held.step02", "ttft"))
    row = _compare("ttft", first, second).rows[1]
    assert row.percentile == "p95" and row.verdict is Verdict.UNDECIDED
    assert (
        row.rel_ci is not None and row.rel_ci[1] is not None and row.rel_ci[1] < -0.05
    )  # the interval alone: faster
    assert row.dependence_note is not None and "moved together over much of its run" in row.dependence_note
    assert row.to_dict()["dependence_note"] == row.dependence_note
