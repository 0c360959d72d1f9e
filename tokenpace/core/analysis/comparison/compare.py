"""Compare two sides of runs metric by metric: percentiles, intervals that count the noise between
requests and between runs, verdicts against a practical threshold, the rank test. Pure."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from tokenpace.core.analysis.evidence.bootstrap import DEFAULT_RESAMPLES, DiffEstimate
from tokenpace.core.analysis.evidence.gate_noise import gate_noise
from tokenpace.core.analysis.evidence.ranktest import mann_whitney
from tokenpace.core.analysis.evidence.runchange import (
    Change,
    SideLevels,
    change,
    cluster_caveat,
    open_change,
    side_levels,
)
from tokenpace.core.analysis.evidence.runnoise import GroupNoise, RunNoise, concurrent, group_noise, noise_key
from tokenpace.core.analysis.evidence.samples import METRICS, Samples, metric_samples
from tokenpace.core.analysis.evidence.verdict import (
    DEFAULT_MIN_EFFECT,
    Verdict,
    decide_interval,
    decision_rule,
    enough_in_every_run,
)
from tokenpace.core.record import RequestRecord
from tokenpace.core.stats import enough_samples, samples_needed

DEFAULT_PERCENTILES = (50.0, 95.0, 99.0)
# A run's half-to-half drift is one draw of how far its level wanders: a verdict resting on runs whose
# dependence is not measured stands only where this many such drifts (both sides' together) cannot
# carry the change across the threshold.
DRIFT_REACH = 2.0
DEFAULT_ALPHA = 0.05


@dataclass(slots=True)
class PercentileRow:
    metric: str
    percentile: str  # "p95"
    n_a: int
    n_b: int
    a: float | None
    b: float | None
    diff: float | None
    ci: tuple[float, float] | None
    rel: float | None
    rel_ci: tuple[float | None, float | None] | None
    p_value: float | None
    verdict: Verdict
    detectable: float | None = None  # smallest worsening beyond the threshold called 9 times in 10
    runs_needed: int | None = None  # runs a side that would decide an undecided row (None: too close)
    noise: RunNoise | None = None  # the between-run noise the interval counts
    change: Change | None = None  # what the interval rests on (for a gate's own threshold)
    # effective sample sizes: the requests worth as many independent ones (ITL: requests, not gaps)
    n_eff_a: float | None = None
    n_eff_b: float | None = None
    # what each side's bootstrap resampled: "requests", "time blocks", or whole "user"s / "session"s
    resampled_by_a: str | None = None
    resampled_by_b: str | None = None
    # why a verdict the interval alone would have made is undecided: too few effective requests, or
    # a run whose requests moved together over much of it; and what would decide
    dependence_note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in asdict(self).items() if k not in ("noise", "change")}
        out["verdict"] = self.verdict.value
        out["run_noise"] = self.noise.to_dict() if self.noise else None
        return out


@dataclass(slots=True)
class MetricResult:
    metric: str
    title: str
    unit: str
    higher_is_better: bool
    n_a: int
    n_b: int
    rank_p: float | None
    prob_b_greater: float | None
    verdict: Verdict
    rows: list[PercentileRow] = field(default_factory=list)
    n_eff_a: float | None = None  # at the median, whose row decides the metric
    n_eff_b: float | None = None
    resampled_by_a: str | None = None
    resampled_by_b: str | None = None

    def row(self, percentile: str) -> PercentileRow | None:
        return next((r for r in self.rows if r.percentile == percentile), None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "title": self.title,
            "unit": self.unit,
            "higher_is_better": self.higher_is_better,
            "n_a": self.n_a,
            "n_b": self.n_b,
            "n_eff_a": self.n_eff_a,
            "n_eff_b": self.n_eff_b,
            "resampled_by_a": self.resampled_by_a,
            "resampled_by_b": self.resampled_by_b,
            "rank_test_p": self.rank_p,
            "prob_b_greater": self.prob_b_greater,
            "verdict": self.verdict.value,
            "percentiles": [r.to_dict() for r in self.rows],
        }


@dataclass(slots=True)
class Comparison:
    alpha: float
    min_effect: float
    metrics: list[MetricResult]
    method: str = (
        "runs' percentiles; bootstrap over requests inside each run (in blocks of send time where "
        "neighbours moved together), plus noise between runs"
    )
    rule_text: str | None = None  # a design-specific decision rule (paired blocks)
    runs_a: int = 1
    runs_b: int = 1

    def metric(self, name: str) -> MetricResult:
        return next(m for m in self.metrics if m.metric == name)

    @property
    def rule(self) -> str:
        return self.rule_text or decision_rule(self.alpha, self.min_effect)

    @property
    def assumed_noise(self) -> list[str]:
        """Percentiles whose between-run noise was assumed, not learned."""
        return [
            f"{r.metric}.{r.percentile}" for m in self.metrics for r in m.rows if r.noise and r.noise.assumed
        ]

    def to_dict(self) -> dict[str, Any]:
        return {
            "alpha": self.alpha,
            "min_effect": self.min_effect,
            "method": self.method,
            "decision_rule": self.rule,
            "runs_a": self.runs_a,
            "runs_b": self.runs_b,
            "metrics": [m.to_dict() for m in self.metrics],
        }


def pct_name(q: float) -> str:
    return f"p{q:g}"


def row_from_estimate(
    metric: str, q: float, n_a: int, n_b: int, est: DiffEstimate | None, verdict: Verdict
) -> PercentileRow:
    """A row from a bootstrap estimate (paired blocks), or an empty one."""
    if est is None:
        return PercentileRow(metric, pct_name(q), n_a, n_b, None, None, None, None, None, None, None, verdict)
    return PercentileRow(
        metric,
        pct_name(q),
        n_a,
        n_b,
        est.a,
        est.b,
        est.diff,
        (est.lo, est.hi),
        est.rel,
        (est.rel_lo, est.rel_hi),
        est.p_value,
        verdict,
    )


def rank_units(samples: Samples) -> np.ndarray:
    """Independent units for the rank test: the values, or each request's median for ITL gaps
    (gaps of one stream are correlated; testing them as independent would overstate significance)."""
    if samples.flat:
        return samples.values
    return np.array([float(np.median(g)) for g in samples.groups])


def row_from_change(
    metric: str, q: float, n_a: int, n_b: int, ch: Change, verdict: Verdict, noise: RunNoise
) -> PercentileRow:
    return PercentileRow(
        metric,
        pct_name(q),
        n_a,
        n_b,
        ch.a,
        ch.b,
        ch.diff,
        ch.ci,
        ch.rel,
        (ch.rel_lo, ch.rel_hi),
        ch.p_value,
        verdict,
        ch.detectable,
        ch.runs_needed,
        noise,
        ch,
    )


def _pooled_samples(runs: Sequence[Samples]) -> Samples:
    return Samples([g for s in runs for g in s.groups])


def compare_samples(
    metric: str,
    runs_a: Sequence[Samples],
    runs_b: Sequence[Samples],
    percentiles: Sequence[float] = DEFAULT_PERCENTILES,
    alpha: float = DEFAULT_ALPHA,
    min_effect: float = DEFAULT_MIN_EFFECT,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    learned: Sequence[GroupNoise] = (),
    one_sided: bool = False,
    same_window: bool = False,
    host: str | None = None,
) -> MetricResult:
    """One metric, side B's runs against side A's. ``learned``: between-run noise estimates of
    other repeat groups under the same conditions; the sides' own runs add theirs, and the noise
    used is never below what they show (``gate_noise``; ``host``: the sides' host condition, whose
    estimates alone count). ``same_window``: the sides were measured interleaved over one window
    (no noise between runs to count)."""
    info = METRICS[metric]
    pool_a, pool_b = _pooled_samples(runs_a), _pooled_samples(runs_b)
    n_a, n_b = pool_a.n, pool_b.n
    result = MetricResult(
        metric, info.title, info.unit, info.higher_is_better, n_a, n_b, None, None, Verdict.TOO_FEW
    )
    runs_a = [r for r in runs_a if r.n]
    runs_b = [r for r in runs_b if r.n]
    qs = sorted(set(percentiles) | {50.0})
    if not runs_a or not runs_b:
        result.rows = [row_from_estimate(metric, q, n_a, n_b, None, Verdict.TOO_FEW) for q in percentiles]
        return result
    rng = np.random.default_rng([seed, 7])
    # Interleaved in one window (arms), both sides share the host's stalls: no floor for episodes
    # that move both alike.
    floor = not same_window
    side_a = side_levels(runs_a, qs, resamples, rng, floor)
    side_b = side_levels(runs_b, qs, resamples, rng, floor)
    rows = {}
    for j, q in enumerate(qs):
        key = noise_key(metric, q)
        own = [g for s in (side_a, side_b) if (g := group_noise(key, s.values[:, j], s.ses[:, j]))]
        noise = concurrent(key) if same_window else gate_noise(key, learned, own, host)
        ch = change(
            side_a.values[:, j], side_a.ses[:, j], side_b.values[:, j], side_b.ses[:, j],
            noise, alpha, min_effect, info.higher_is_better, one_sided,
        )  # fmt: skip
        enough = enough_in_every_run(side_a.counts + side_b.counts, q)
        verdict = decide_interval(ch.rel_lo, ch.rel_hi, enough, info.higher_is_better, min_effect)
        drift = DRIFT_REACH * (side_a.drift(j) + side_b.drift(j))
        decided = verdict in (Verdict.SLOWER, Verdict.FASTER, Verdict.NEGLIGIBLE)
        held = decided and beyond_drift(ch, drift, verdict, info.higher_is_better, min_effect)
        if not held:  # a side the runs cannot bound stays open, unless their drift decides it
            ch = open_change(ch, side_a.open_sides(j, q, alpha), side_b.open_sides(j, q, alpha))
            verdict = decide_interval(ch.rel_lo, ch.rel_hi, enough, info.higher_is_better, min_effect)
        rows[q] = row_from_change(metric, q, n_a, n_b, ch, verdict, noise)
        rows[q].n_eff_a, rows[q].n_eff_b = round(side_a.n_eff(j), 1), round(side_b.n_eff(j), 1)
        rows[q].resampled_by_a, rows[q].resampled_by_b = side_a.resampled_by, side_b.resampled_by
        note = dependence_caveat(q, j, side_a, side_b)
        # A run's halves hold the same users: their drift says nothing of the noise between users.
        few_users = cluster_caveat(q, j, side_a, side_b)
        if few_users and verdict is not Verdict.TOO_FEW:
            rows[q].verdict, rows[q].dependence_note = Verdict.UNDECIDED, few_users
        elif note and decided and not held:  # decided on its closed interval: say what would decide
            rows[q].verdict, rows[q].dependence_note = Verdict.UNDECIDED, note
    result.rows = [rows[q] for q in percentiles]
    rank = mann_whitney(rank_units(pool_a), rank_units(pool_b))
    if rank is not None:
        result.rank_p = rank.p_value
        result.prob_b_greater = rank.prob_b_greater
    result.verdict = rows[50.0].verdict  # the median's: its interval counts the noise between runs
    result.n_eff_a, result.n_eff_b = rows[50.0].n_eff_a, rows[50.0].n_eff_b
    result.resampled_by_a, result.resampled_by_b = side_a.resampled_by, side_b.resampled_by
    return result


def beyond_drift(
    ch: Change, drift: float, verdict: Verdict, higher_is_better: bool, min_effect: float
) -> bool:
    """Whether the change keeps its verdict moved either way by ``drift`` (log scale: DRIFT_REACH x
    the sides' own half-to-half drifts): a difference the runs' drift cannot carry across the
    threshold is decided however long their requests moved together."""
    if ch.rel is None or not math.isfinite(drift):
        return False
    log_r = math.log1p(ch.rel)
    lo, hi = math.expm1(log_r - drift), math.expm1(log_r + drift)
    return decide_interval(lo, hi, True, higher_is_better, min_effect) is verdict


def dependence_caveat(q: float, column: int, *sides: SideLevels) -> str | None:
    """Why one percentile's verdict cannot rest on the sides' requests, counting how they moved
    together: too few effective requests beyond it, or a single run whose dependence lasted too long
    to be measured within it. None when neither."""
    for name, side in zip("AB", sides, strict=True):
        n, n_eff = float(sum(side.counts)), side.n_eff(column)
        if side.runs == 1 and side.unidentified(column):
            return (
                f"side {name}'s requests moved together over much of its run (a trend, or waves as long "
                f"as the run): the run cannot measure its own noise at {pct_name(q)}; more runs a side "
                "(their spread is the noise) or a longer steady run would decide"
            )
        if not enough_samples(n_eff, q):
            longer = samples_needed(q) * n / max(n_eff, 1.0)
            return (
                f"side {name} holds {n_eff:.0f} effective requests of {n:.0f} (requests moved together): "
                f"too few beyond {pct_name(q)}; about {longer:.0f} requests at this dependence, or more "
                "runs, would decide"
            )
    return None


def compare_runs_records(
    runs_a: Sequence[Sequence[RequestRecord]],
    runs_b: Sequence[Sequence[RequestRecord]],
    percentiles: Sequence[float] = DEFAULT_PERCENTILES,
    alpha: float = DEFAULT_ALPHA,
    min_effect: float = DEFAULT_MIN_EFFECT,
    metrics: Sequence[str] = tuple(METRICS),
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    learned: Sequence[GroupNoise] = (),
    one_sided: bool = False,
    same_window: bool = False,
    host: str | None = None,
) -> Comparison:
    """Compare side B (one or more runs) against side A: positive differences mean B is larger."""
    if not 0 < alpha < 1:
        raise ValueError("alpha must be between 0 and 1")
    if not runs_a or not runs_b:
        raise ValueError("each side needs at least one run")
    out = [
        compare_samples(
            m,
            [metric_samples(r, m) for r in runs_a],
            [metric_samples(r, m) for r in runs_b],
            percentiles,
            alpha,
            min_effect,
            resamples,
            seed + i,
            learned,
            one_sided,
            same_window,
            host,
        )
        for i, m in enumerate(metrics)
    ]
    return Comparison(alpha, min_effect, out, runs_a=len(runs_a), runs_b=len(runs_b))


def compare_records(
    records_a: Sequence[RequestRecord],
    records_b: Sequence[RequestRecord],
    percentiles: Sequence[float] = DEFAULT_PERCENTILES,
    alpha: float = DEFAULT_ALPHA,
    min_effect: float = DEFAULT_MIN_EFFECT,
    metrics: Sequence[str] = tuple(METRICS),
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    learned: Sequence[GroupNoise] = (),
    same_window: bool = False,
) -> Comparison:
    """Compare run B against run A (the reference): positive differences mean B is larger.
    ``same_window``: both were measured interleaved over one window (arms of the gateway)."""
    return compare_runs_records(
        [records_a],
        [records_b],
        percentiles,
        alpha,
        min_effect,
        metrics,
        resamples,
        seed,
        learned,
        same_window=same_window,
    )
