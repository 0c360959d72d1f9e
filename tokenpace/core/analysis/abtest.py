"""Paired-block A/B analysis: the same workload sent to both arms in alternating blocks. Pure.

Block k holds arm A's and arm B's records for the same seeded workload, sent back to back, so slow
drift of the machine or the network affects both arms of a block alike. For each metric and
percentile:

- the estimate is P_q(all B) - P_q(all A), and each block's own difference is reported (paired deltas);
- the confidence interval resamples whole blocks (both arms of a block travel together);
- the p-value is a randomisation test of the design: under "no difference" swapping the arm labels
  within any block changes nothing, so the observed difference is ranked among the differences of
  every within-block swap pattern (all 2^K of them up to 2048, else a seeded random 1999).

With K blocks the smallest attainable p-value is 2 / 2^K; a verdict needs that below alpha
(6 blocks at alpha = 0.05).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from tokenpace.core.analysis.bootstrap import DEFAULT_RESAMPLES, DiffEstimate
from tokenpace.core.analysis.compare import (
    DEFAULT_ALPHA,
    DEFAULT_MIN_EFFECT,
    DEFAULT_PERCENTILES,
    Comparison,
    MetricResult,
    pct_name,
    row_from_estimate,
)
from tokenpace.core.analysis.samples import METRICS, metric_samples
from tokenpace.core.analysis.verdict import Verdict, decide
from tokenpace.record import RequestRecord

_MAX_ENUMERATED = 2048
_RANDOM_PATTERNS = 1999

Block = tuple[Sequence[RequestRecord], Sequence[RequestRecord]]


@dataclass(slots=True)
class AbAnalysis:
    comparison: Comparison
    blocks: int
    block_deltas: dict[str, dict[str, list[float | None]]] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return self.comparison.to_dict() | {"blocks": self.blocks, "block_deltas": self.block_deltas}


def min_p_value(blocks: int) -> float:
    return min(1.0, 2 / 2**blocks)


def _pooled(values: list[np.ndarray], qs: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    if weights is not None:
        values = [v for v, w in zip(values, weights) for _ in range(int(w))]  # noqa: B905
    flat = np.concatenate(values) if values else np.empty(0)
    return np.percentile(flat, qs) if len(flat) else np.full(len(qs), np.nan)


def _patterns(k: int, rng: np.random.Generator) -> np.ndarray:
    if 2**k <= _MAX_ENUMERATED:
        return np.array(list(itertools.product((False, True), repeat=k)), dtype=bool)
    random = rng.random((_RANDOM_PATTERNS, k)) < 0.5
    return np.vstack([np.zeros((1, k), dtype=bool), random])


def _metric(
    metric: str,
    blocks: Sequence[Block],
    qs: list[float],
    alpha: float,
    min_effect: float,
    resamples: int,
    rng: np.random.Generator,
) -> tuple[MetricResult, dict[str, list[float | None]]]:
    info = METRICS[metric]
    per_a = [metric_samples(a, metric).values for a, _ in blocks]
    per_b = [metric_samples(b, metric).values for _, b in blocks]
    n_a, n_b = int(sum(map(len, per_a))), int(sum(map(len, per_b)))
    q_arr = np.asarray(qs)
    result = MetricResult(
        metric, info.title, info.unit, info.higher_is_better, n_a, n_b, None, None, Verdict.TOO_FEW
    )
    deltas: dict[str, list[float | None]] = {}
    for q in qs:
        deltas[pct_name(q)] = [
            float(np.percentile(b, q) - np.percentile(a, q)) if len(a) and len(b) else None
            for a, b in zip(per_a, per_b)  # noqa: B905
        ]
    if n_a == 0 or n_b == 0:
        result.rows = [row_from_estimate(metric, q, n_a, n_b, None, Verdict.TOO_FEW) for q in qs]
        return result, deltas
    pa, pb = _pooled(per_a, q_arr), _pooled(per_b, q_arr)
    observed = pb - pa
    k = len(blocks)
    # Randomisation test: swap arms within the blocks of each pattern.
    extreme = np.zeros(len(qs))
    patterns = _patterns(k, rng)
    for pattern in patterns:
        sa = [b if s else a for a, b, s in zip(per_a, per_b, pattern)]  # noqa: B905
        sb = [a if s else b for a, b, s in zip(per_a, per_b, pattern)]  # noqa: B905
        stat = _pooled(sb, q_arr) - _pooled(sa, q_arr)
        extreme += np.abs(stat) >= np.abs(observed) - 1e-12 * np.abs(observed)
    p_values = extreme / len(patterns)
    # Block bootstrap of the pooled difference.
    diffs = np.empty((resamples, len(qs)))
    rels = np.empty((resamples, len(qs)))
    for i in range(resamples):
        w = np.bincount(rng.integers(0, k, size=k), minlength=k)
        ra, rb = _pooled(per_a, q_arr, w), _pooled(per_b, q_arr, w)
        diffs[i] = rb - ra
        with np.errstate(divide="ignore", invalid="ignore"):
            rels[i] = (rb - ra) / ra
    lo_q, hi_q = alpha / 2, 1 - alpha / 2
    enough_blocks = min_p_value(k) <= alpha
    for j, q in enumerate(qs):
        d, r = diffs[:, j], rels[:, j]
        d, r = d[np.isfinite(d)], r[np.isfinite(r)]
        lo, hi = np.quantile(d, [lo_q, hi_q]) if len(d) else (np.nan, np.nan)
        rel_lo, rel_hi = (float(x) for x in np.quantile(r, [lo_q, hi_q])) if len(r) else (None, None)
        rel = float(observed[j] / pa[j]) if pa[j] else None
        est = DiffEstimate(
            float(pa[j]), float(pb[j]), float(observed[j]), float(lo), float(hi), rel, rel_lo, rel_hi,
            float(p_values[j]), resamples,
        )  # fmt: skip
        verdict = decide(est, n_a, n_b, q, info.higher_is_better, min_effect, bool(p_values[j] < alpha))
        if not enough_blocks:
            verdict = Verdict.TOO_FEW
        result.rows.append(row_from_estimate(metric, q, n_a, n_b, est, verdict))
    median_row = result.row("p50")
    result.verdict = median_row.verdict if median_row is not None else Verdict.TOO_FEW
    return result, deltas


def analyse_blocks(
    blocks: Sequence[Block],
    percentiles: Sequence[float] = DEFAULT_PERCENTILES,
    alpha: float = DEFAULT_ALPHA,
    min_effect: float = DEFAULT_MIN_EFFECT,
    metrics: Sequence[str] = tuple(METRICS),
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> AbAnalysis:
    """Compare arm B against arm A over paired blocks of records."""
    if not blocks:
        raise ValueError("no blocks to analyse")
    rng = np.random.default_rng(seed)
    qs = sorted(set(percentiles) | {50.0})
    results, all_deltas = [], {}
    for m in metrics:
        res, deltas = _metric(m, blocks, qs, alpha, min_effect, resamples, rng)
        res.rows = [r for r in res.rows if float(r.percentile[1:]) in set(percentiles)]
        results.append(res)
        all_deltas[m] = deltas
    method = (
        f"paired blocks: {len(blocks)} blocks, randomisation test of within-block arm swaps, "
        f"block bootstrap interval"
    )
    return AbAnalysis(Comparison(alpha, min_effect, results, method), len(blocks), all_deltas)
