"""Compare two runs' records metric by metric: percentiles, bootstrap CIs, rank test, verdicts. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from tokenpace.core.analysis.bootstrap import DEFAULT_RESAMPLES, DiffEstimate, percentile_differences
from tokenpace.core.analysis.ranktest import mann_whitney
from tokenpace.core.analysis.samples import METRICS, Samples, metric_samples
from tokenpace.core.analysis.verdict import Verdict, decide, decide_shift, decision_rule
from tokenpace.core.record import RequestRecord
from tokenpace.core.stats import enough_samples

DEFAULT_PERCENTILES = (50.0, 95.0, 99.0)
DEFAULT_ALPHA = 0.05
DEFAULT_MIN_EFFECT = 0.01


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
    p_value: float | None  # bootstrap p-value
    verdict: Verdict

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["verdict"] = self.verdict.value
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
    method: str = "bootstrap over requests (independent samples)"
    rule_text: str | None = None  # a design-specific decision rule (paired blocks)

    def metric(self, name: str) -> MetricResult:
        return next(m for m in self.metrics if m.metric == name)

    @property
    def rule(self) -> str:
        return self.rule_text or decision_rule(self.alpha, self.min_effect)

    def to_dict(self) -> dict[str, Any]:
        return {
            "alpha": self.alpha,
            "min_effect": self.min_effect,
            "method": self.method,
            "decision_rule": self.rule,
            "metrics": [m.to_dict() for m in self.metrics],
        }


def pct_name(q: float) -> str:
    return f"p{q:g}"


def row_from_estimate(
    metric: str, q: float, n_a: int, n_b: int, est: DiffEstimate | None, verdict: Verdict
) -> PercentileRow:
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


def compare_samples(
    metric: str,
    a: Samples,
    b: Samples,
    percentiles: Sequence[float] = DEFAULT_PERCENTILES,
    alpha: float = DEFAULT_ALPHA,
    min_effect: float = DEFAULT_MIN_EFFECT,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> MetricResult:
    info = METRICS[metric]
    n_a, n_b = a.n, b.n
    result = MetricResult(
        metric, info.title, info.unit, info.higher_is_better, n_a, n_b, None, None, Verdict.TOO_FEW
    )
    if n_a == 0 or n_b == 0:
        result.rows = [row_from_estimate(metric, q, n_a, n_b, None, Verdict.TOO_FEW) for q in percentiles]
        return result
    qs = sorted(set(percentiles) | {50.0})
    estimates = percentile_differences(a, b, qs, 1 - alpha, resamples, seed)
    for q in percentiles:
        est = estimates[q]
        verdict = decide(est, n_a, n_b, q, info.higher_is_better, min_effect)
        result.rows.append(row_from_estimate(metric, q, n_a, n_b, est, verdict))
    rank = mann_whitney(rank_units(a), rank_units(b))
    if rank is not None:
        result.rank_p = rank.p_value
        result.prob_b_greater = rank.prob_b_greater
    result.verdict = decide_shift(
        result.rank_p,
        (result.prob_b_greater or 0.5) > 0.5,
        estimates[50.0].rel,
        enough_samples(n_a, 50) and enough_samples(n_b, 50),
        info.higher_is_better,
        alpha,
        min_effect,
    )
    return result


def compare_records(
    records_a: Sequence[RequestRecord],
    records_b: Sequence[RequestRecord],
    percentiles: Sequence[float] = DEFAULT_PERCENTILES,
    alpha: float = DEFAULT_ALPHA,
    min_effect: float = DEFAULT_MIN_EFFECT,
    metrics: Sequence[str] = tuple(METRICS),
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> Comparison:
    """Compare run B against run A (the reference): positive differences mean B is larger."""
    if not 0 < alpha < 1:
        raise ValueError("alpha must be between 0 and 1")
    out = []
    for i, m in enumerate(metrics):
        out.append(
            compare_samples(
                m,
                metric_samples(records_a, m),
                metric_samples(records_b, m),
                percentiles,
                alpha,
                min_effect,
                resamples,
                seed + i,
            )
        )
    return Comparison(alpha, min_effect, out)
