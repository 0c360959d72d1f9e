"""Arms' samples by common load band, and a percentile at the reference's load mix. Pure.

The candidate is weighted to the reference's share in each band both arms hold (direct
standardisation), so a percentile rests on fewer effective requests than the arm holds (Kish:
n_eff = 1 / sum of the squared weights, summing to 1). One home for that weighting, shared by the
matched change (``load_match``) and what a guard lacks (``sample_size``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from statistics import NormalDist

import numpy as np

from tokenpace.core.analysis.evidence.samples import metric_samples
from tokenpace.core.record import RequestRecord
from tokenpace.core.stats import enough_samples

Strata = tuple[list[np.ndarray], list[np.ndarray], list[float]]  # each arm's sorted values, weights
_Z95 = NormalDist().inv_cdf(0.975)


def matched_strata(
    by_band: tuple[dict[int, list[RequestRecord]], dict[int, list[RequestRecord]]],
    common: Iterable[int],
    metric: str,
) -> Strata:
    """Per common band holding both arms' samples of ``metric``: each arm's, sorted, and the
    reference's count (the band's weight)."""
    sides = [[np.sort(metric_samples(arm[b], metric).values) for arm in by_band] for b in common]
    held = [(r, c) for r, c in sides if len(r) and len(c)]
    return [r for r, _ in held], [c for _, c in held], [float(len(r)) for r, _ in held]


def kish(strata: Sequence[np.ndarray], shares: Sequence[float]) -> float:
    """The effective sample size of strata weighted by ``shares`` (summing to 1)."""
    return 1.0 / sum(w * w / len(s) for s, w in zip(strata, shares, strict=True))


def _weighted_quantile(values: np.ndarray, weights: np.ndarray, q: float) -> float:
    cum = np.cumsum(weights)
    at = (cum - weights / 2) / cum[-1]
    return float(np.interp(q, at, values))


def percentile_se(
    strata: list[np.ndarray], shares: list[float], q: float
) -> tuple[float, float, float] | None:
    """The weighted percentile of sorted strata with these shares, its SE on the log scale
    (Woodruff), and the effective sample size (Kish). None without enough samples."""
    n_eff = kish(strata, shares)
    if not enough_samples(int(n_eff), q * 100):
        return None
    values = np.concatenate(strata)
    weights = np.concatenate([np.full(len(s), w / len(s)) for s, w in zip(strata, shares, strict=True)])
    order = np.argsort(values, kind="stable")
    values, weights = values[order], weights[order]
    x = _weighted_quantile(values, weights, q)
    var = sum(
        w**2 * p * (1 - p) / len(s)
        for s, w in zip(strata, shares, strict=True)
        for p in [(float(np.searchsorted(s, x, "right")) + 0.5) / (len(s) + 1)]
    )
    half = _Z95 * math.sqrt(var)
    lo = _weighted_quantile(values, weights, max(q - half, 0.0))
    hi = _weighted_quantile(values, weights, min(q + half, 1.0))
    if not (x > 0 and lo > 0 and hi > 0):
        return None
    return x, (math.log(hi) - math.log(lo)) / (2 * _Z95), n_eff
