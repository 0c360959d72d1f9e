"""Paired-block A/B analysis: the same workload sent to both arms in alternating blocks. Pure.

Block k holds arm A's and arm B's records for the same seeded workload, sent back to back, so slow
drift of the machine or the network affects both arms of a block alike. For each metric and
percentile:

- each block gives a paired delta, P_q(B in block k) - P_q(A in block k); the estimate (B - A) is
  their mean, and the A and B columns show the percentiles of all blocks pooled;
- the confidence interval resamples whole blocks;
- the p-value is a randomisation test of the design: under "no difference" each block's delta is as
  likely to have the other sign, so the observed mean is ranked among the means of every sign
  pattern (all 2^K up to 2048, else a seeded random 1999);
- no verdict on a percentile that a block's own sample cannot carry (P95 needs 100 requests per
  arm and block), nor with too few blocks: the smallest attainable p-value is 2 / 2^K, so a verdict
  at alpha = 0.05 needs at least 6 blocks.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any

import numpy as np

from tokenpace.core.analysis.comparison.compare import (
    DEFAULT_ALPHA,
    DEFAULT_PERCENTILES,
    Comparison,
    MetricResult,
    pct_name,
    row_from_estimate,
)
from tokenpace.core.analysis.evidence.bootstrap import DEFAULT_RESAMPLES, DiffEstimate
from tokenpace.core.analysis.evidence.runnoise import POWER
from tokenpace.core.analysis.evidence.samples import METRICS, metric_samples
from tokenpace.core.analysis.evidence.verdict import DEFAULT_MIN_EFFECT, Verdict, decide_interval
from tokenpace.core.record import RequestRecord
from tokenpace.core.stats import enough_samples

_Z_POWER = NormalDist().inv_cdf(POWER)
_MAX_ENUMERATED = 2048
_RANDOM_PATTERNS = 1999

Block = tuple[Sequence[RequestRecord], Sequence[RequestRecord]]


@dataclass(slots=True)
class AbAnalysis:
    comparison: Comparison
    blocks: int
    block_deltas: dict[str, dict[str, list[float | None]]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return self.comparison.to_dict() | {"blocks": self.blocks, "block_deltas": self.block_deltas}


def min_p_value(blocks: int) -> float:
    return min(1.0, 2 / 2.0**blocks)


def _pooled(values: list[np.ndarray], qs: np.ndarray) -> np.ndarray:
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
    usable = [k for k, (a, b) in enumerate(zip(per_a, per_b)) if len(a) and len(b)]  # noqa: B905
    if not usable:
        result.rows = [row_from_estimate(metric, q, n_a, n_b, None, Verdict.TOO_FEW) for q in qs]
        return result, deltas
    pa, pb = _pooled(per_a, q_arr), _pooled(per_b, q_arr)
    # Paired deltas: one per block and percentile; the block's own A percentile scales them.
    block_a = np.array([np.percentile(per_a[k], q_arr) for k in usable])
    block_d = np.array([np.percentile(per_b[k], q_arr) - np.percentile(per_a[k], q_arr) for k in usable])
    k = len(usable)
    observed = block_d.mean(axis=0)
    # Randomisation test: under no difference each block's delta is as likely negated.
    signs = np.where(_patterns(k, rng), -1.0, 1.0)
    stats = signs @ block_d / k
    p_values = (np.abs(stats) >= np.abs(observed) - 1e-12 * np.abs(observed)).mean(axis=0)
    # Block bootstrap of the mean delta (and of it relative to the mean A percentile).
    draws = rng.integers(0, k, size=(resamples, k))
    boot_d = block_d[draws].mean(axis=1)
    boot_a = block_a[draws].mean(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        boot_rel = boot_d / boot_a
    lo_q, hi_q = alpha / 2, 1 - alpha / 2
    z_interval = NormalDist().inv_cdf(hi_q)
    enough_blocks = min_p_value(k) <= alpha
    smallest_block = min(min(len(per_a[i]), len(per_b[i])) for i in usable)
    for j, q in enumerate(qs):
        lo, hi = (float(x) for x in np.quantile(boot_d[:, j], [lo_q, hi_q]))
        r = boot_rel[:, j][np.isfinite(boot_rel[:, j])]
        rel_lo, rel_hi = (float(x) for x in np.quantile(r, [lo_q, hi_q])) if len(r) else (None, None)
        mean_a = float(block_a[:, j].mean())
        rel = float(observed[j] / mean_a) if mean_a else None
        est = DiffEstimate(
            float(pa[j]), float(pb[j]), float(observed[j]), lo, hi, rel, rel_lo, rel_hi,
            float(p_values[j]), resamples,
        )  # fmt: skip
        # Each block's percentile must rest on enough samples, and the blocks must allow p < alpha.
        enough = enough_blocks and enough_samples(smallest_block, q)
        verdict = decide_interval(rel_lo, rel_hi, enough, info.higher_is_better, min_effect)
        row = row_from_estimate(metric, q, n_a, n_b, est, verdict)
        if len(r) > 1:  # blocks are short runs: their spread is the noise between runs
            row.detectable = min_effect + (z_interval + _Z_POWER) * float(np.std(r, ddof=1))
        result.rows.append(row)
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
        f"paired blocks: {len(blocks)} blocks; B - A is the mean of the per-block differences, its "
        f"interval a block bootstrap, its p-value a sign-flip randomisation test"
    )
    rule = (
        f"Each block is a short run of both arms: the block bootstrap interval of the mean per-block "
        f"change counts the noise between runs as well as between requests. A percentile is called "
        f"slower or faster only when that {100 * (1 - alpha):g}% interval lies wholly beyond "
        f"{100 * min_effect:g}% (--min-effect), 'negligible' when it lies within +-{100 * min_effect:g}%, "
        f"else 'undecided'; 'detectable' is the smallest true change called 9 times in 10 with these "
        f"blocks. The p-value (sign-flip randomisation test) is shown. The metric's overall verdict is "
        f"its P50's. No verdict on a percentile that each block's own sample cannot carry (5 samples "
        f"beyond it: P50 needs 10 requests per arm and block, P95 100), nor with fewer than "
        f"{_min_blocks(alpha)} blocks (the smallest attainable p is 2 / 2^blocks)."
    )
    comparison = Comparison(alpha, min_effect, results, method, rule)
    return AbAnalysis(comparison, len(blocks), all_deltas)


def _min_blocks(alpha: float) -> int:
    k = 1
    while min_p_value(k) > alpha:
        k += 1
    return k
