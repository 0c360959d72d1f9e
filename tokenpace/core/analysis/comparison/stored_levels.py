"""A run's percentiles kept with it (each with its dependence-aware bootstrap SE, its effective size
and its sample count), and a comparison made from them alone. Pure.

Everything ``compare`` needs of a run's records is, per metric percentile, the run's value, its
sampling SE (the bootstrap in blocks of send time) and its counts; the noise between runs is learned
from the same figures of the library's reruns (``group_noise`` on their values and SEs). Computed
once when a run is saved, they let a comparison combine stored figures -- the sides' changes on the
log scale with their SEs in quadrature plus the noise between runs -- instead of resampling records.
The verdict rule is the same; only the rank test needs the records, and is left out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from tokenpace.core.analysis.comparison.compare import (
    DEFAULT_ALPHA,
    DEFAULT_PERCENTILES,
    Comparison,
    MetricResult,
    row_from_change,
    row_from_estimate,
)
from tokenpace.core.analysis.evidence.bootstrap import DEFAULT_RESAMPLES
from tokenpace.core.analysis.evidence.gate_noise import gate_noise
from tokenpace.core.analysis.evidence.runchange import change, open_change, side_levels
from tokenpace.core.analysis.evidence.runnoise import GroupNoise, concurrent, group_noise, noise_key
from tokenpace.core.analysis.evidence.samples import METRICS, metric_samples
from tokenpace.core.analysis.evidence.verdict import (
    DEFAULT_MIN_EFFECT,
    Verdict,
    decide_interval,
    enough_in_every_run,
)
from tokenpace.core.record import RequestRecord
from tokenpace.core.stats import enough_samples, open_sides

# The percentiles kept: those compare shows and those the library learns its noise at.
STORED_PERCENTILES = (50.0, 90.0, 95.0, 99.0)
STORED_METHOD = (
    "stored figures: each run's percentiles with their bootstrap SEs (in blocks of send time where "
    "neighbours moved together), computed when the run was saved, combined on the log scale, plus "
    "noise between runs learned from the library's stored figures (no rank test)"
)


@dataclass(frozen=True, slots=True)
class RunLevel:
    """One metric percentile of one run (``key``: ``ttft.p95``)."""

    key: str
    n: int  # the run's samples of the metric (ITL: gaps)
    value: float
    se: float | None  # bootstrap SE of ``value``; None where the run is too small for one
    n_eff: float  # the requests worth as many independent ones at this percentile


Levels = Mapping[str, RunLevel]  # one run's, by key


def run_levels(
    records: Sequence[RequestRecord], resamples: int = DEFAULT_RESAMPLES, seed: int = 0
) -> list[RunLevel]:
    """Every metric's ``STORED_PERCENTILES`` of one run (metrics it has no sample of: none)."""
    rng = np.random.default_rng([seed, 11])
    out: list[RunLevel] = []
    for metric in METRICS:
        s = metric_samples(records, metric)
        if not s.n:
            continue
        lv = side_levels([s], STORED_PERCENTILES, resamples, rng)
        for j, q in enumerate(STORED_PERCENTILES):
            se = float(lv.ses[0, j])
            value = float(lv.values[0, j])
            kept_se = se if math.isfinite(se) else None
            out.append(RunLevel(noise_key(metric, q), s.n, value, kept_se, lv.n_eff(j)))
    return out


def _column(runs: Sequence[Levels], key: str) -> tuple[np.ndarray, np.ndarray, list[int], float]:
    got = [r[key] for r in runs if key in r]
    values = np.array([g.value for g in got], dtype=np.float64)
    ses = np.array([np.nan if g.se is None else g.se for g in got], dtype=np.float64)
    return values, ses, [g.n for g in got], float(sum(g.n_eff for g in got))


def _open(counts: Sequence[int], n_eff: float, q: float, alpha: float) -> tuple[bool, bool]:
    """``SideLevels.open_sides`` from stored figures, which keep no tie flag: a near-constant level
    with few effective requests is left open here where the records would bound it (undecided)."""
    return open_sides(float(sum(counts)), n_eff, q / 100, alpha / 2)


def levels_noise(runs: Sequence[Levels]) -> list[GroupNoise]:
    """What reruns of one test teach of the noise between runs, from their stored figures: as
    ``repeats.repeat_noise`` from their records (every run holding enough samples at a percentile)."""
    out: list[GroupNoise] = []
    if len(runs) < 2:
        return out
    for metric in METRICS:
        for q in STORED_PERCENTILES:
            key = noise_key(metric, q)
            if not all(key in r and enough_samples(r[key].n, q) for r in runs):
                continue
            values, ses, _, _ = _column(runs, key)
            if (est := group_noise(key, values, ses)) is not None:
                out.append(est)
    return out


def _metric(
    metric: str,
    runs_a: Sequence[Levels],
    runs_b: Sequence[Levels],
    percentiles: Sequence[float],
    alpha: float,
    min_effect: float,
    learned: Sequence[GroupNoise],
    one_sided: bool,
    same_window: bool,
    host: str | None,
) -> MetricResult:
    info = METRICS[metric]
    first = noise_key(metric, STORED_PERCENTILES[0])
    n_a = sum(r[first].n for r in runs_a if first in r)
    n_b = sum(r[first].n for r in runs_b if first in r)
    result = MetricResult(
        metric, info.title, info.unit, info.higher_is_better, n_a, n_b, None, None, Verdict.TOO_FEW
    )
    if not n_a or not n_b:
        result.rows = [row_from_estimate(metric, q, n_a, n_b, None, Verdict.TOO_FEW) for q in percentiles]
        return result
    rows = {}
    for q in sorted(set(percentiles) | {50.0}):
        key = noise_key(metric, q)
        va, sa, ca, ea = _column(runs_a, key)
        vb, sb, cb, eb = _column(runs_b, key)
        own = [g for v, s in ((va, sa), (vb, sb)) if (g := group_noise(key, v, s))]
        noise = concurrent(key) if same_window else gate_noise(key, learned, own, host)
        ch = change(va, sa, vb, sb, noise, alpha, min_effect, info.higher_is_better, one_sided)
        ch = open_change(ch, _open(ca, ea, q, alpha), _open(cb, eb, q, alpha))
        verdict = decide_interval(
            ch.rel_lo, ch.rel_hi, enough_in_every_run(ca + cb, q), info.higher_is_better, min_effect
        )
        rows[q] = row_from_change(metric, q, n_a, n_b, ch, verdict, noise)
        rows[q].n_eff_a, rows[q].n_eff_b = round(ea, 1), round(eb, 1)
    result.rows = [rows[q] for q in percentiles]
    result.verdict = rows[50.0].verdict
    result.n_eff_a, result.n_eff_b = rows[50.0].n_eff_a, rows[50.0].n_eff_b
    return result


def compare_levels(
    runs_a: Sequence[Levels],
    runs_b: Sequence[Levels],
    percentiles: Sequence[float] = DEFAULT_PERCENTILES,
    alpha: float = DEFAULT_ALPHA,
    min_effect: float = DEFAULT_MIN_EFFECT,
    learned: Sequence[GroupNoise] = (),
    one_sided: bool = False,
    same_window: bool = False,
    host: str | None = None,
) -> Comparison:
    """``compare_runs_records`` from the sides' stored figures: the same intervals and verdict rule,
    the SEs those of the bootstrap run when each run was saved; no rank test."""
    if not 0 < alpha < 1:
        raise ValueError("alpha must be between 0 and 1")
    if not runs_a or not runs_b:
        raise ValueError("each side needs at least one run")
    if missing := sorted(set(percentiles) - set(STORED_PERCENTILES)):
        raise ValueError(f"percentiles not stored with runs: {', '.join(f'{q:g}' for q in missing)}")
    out = [
        _metric(m, runs_a, runs_b, percentiles, alpha, min_effect, learned, one_sided, same_window, host)
        for m in METRICS
    ]
    return Comparison(alpha, min_effect, out, method=STORED_METHOD, runs_a=len(runs_a), runs_b=len(runs_b))
