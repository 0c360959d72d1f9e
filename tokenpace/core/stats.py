"""Distribution statistics: percentiles with sample counts and confidence intervals. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any

import numpy as np

PERCENTILES = (50, 90, 95, 99)

# A percentile rests on too few samples when fewer than this many observations lie beyond it
# (P99 of 50 requests has half an observation beyond it: it is just the maximum, i.e. noise).
MIN_TAIL_SAMPLES = 5

# Up to this many samples the order-statistic interval uses the exact binomial distribution; past
# it, the normal approximation to it (then accurate to well under one rank).
_EXACT_BINOMIAL_N = 2000


@dataclass(slots=True)
class Distribution:
    """Summary of one metric's samples (e.g. TTFT in ms)."""

    n: int
    mean: float | None = None
    std: float | None = None
    min: float | None = None
    max: float | None = None
    p50: float | None = None
    p90: float | None = None
    p95: float | None = None
    p99: float | None = None
    ci95: dict[str, tuple[float, float]] = field(default_factory=dict)
    low_sample: list[str] = field(default_factory=list)  # percentiles resting on too few samples

    def percentile(self, name: str) -> float | None:
        value: float | None = getattr(self, name)
        return value

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "n": self.n,
            "mean": self.mean,
            "std": self.std,
            "min": self.min,
            "max": self.max,
        }
        for p in PERCENTILES:
            out[f"p{p}"] = getattr(self, f"p{p}")
        out["ci95"] = {k: list(v) for k, v in self.ci95.items()}
        out["low_sample"] = list(self.low_sample)
        return out


def robust_sd(values: Sequence[float] | np.ndarray) -> float:
    """A standard deviation a few stalls cannot inflate: 1.4826 x the median absolute deviation
    (the normal's sd where the data are normal)."""
    arr = np.asarray(values, dtype=float)
    return 1.4826 * float(np.median(np.abs(arr - np.median(arr))))


def enough_samples(n: int, percentile: float) -> bool:
    """True when at least MIN_TAIL_SAMPLES observations lie beyond the percentile."""
    tail = min(percentile, 100 - percentile) / 100
    return n * tail >= MIN_TAIL_SAMPLES


def samples_needed(percentile: float) -> int:
    """The fewest samples with MIN_TAIL_SAMPLES beyond the percentile (P95: 100, P99: 500)."""
    tail = min(percentile, 100 - percentile) / 100
    if tail <= 0:
        return 0
    n = int(np.ceil(MIN_TAIL_SAMPLES / tail))
    while not enough_samples(n, percentile):  # the same rounding as enough_samples (99.9: 5001)
        n += 1
    while n > 1 and enough_samples(n - 1, percentile):
        n -= 1
    return n


def percentile_cis(
    sorted_values: np.ndarray, qs: Sequence[float], confidence: float = 0.95
) -> list[tuple[float, float]]:
    """Confidence intervals of several percentiles (0-100) of one sample: the distribution-free
    order-statistic interval. The number of observations below the true percentile is binomial
    (n, q), so the ranks that bracket it with the asked confidence come from that distribution,
    whatever the latencies' own distribution. Exact for up to 2,000 samples, the normal
    approximation beyond. A rank past either end of the sample is clamped to it (such a tail is
    flagged ``low_sample`` anyway). Costs nothing next to a bootstrap: no resampling."""
    n = len(sorted_values)
    if n == 0:
        return []
    alpha = (1 - confidence) / 2
    out = []
    for q in qs:
        lo_rank, hi_rank = rank_bounds(n, q / 100, alpha)
        out.append((float(sorted_values[lo_rank]), float(sorted_values[hi_rank])))
    return out


def rank_bounds(n: int, p: float, alpha: float) -> tuple[int, int]:
    """0-based ranks (l, u) with P(X_(l) <= percentile <= X_(u)) >= 1 - 2 alpha, as equal tails."""
    if n * p * (1 - p) > 0 and n > _EXACT_BINOMIAL_N:
        z = NormalDist().inv_cdf(1 - alpha)
        half = z * np.sqrt(n * p * (1 - p))
        lo = int(np.floor(n * p - half))
        hi = int(np.ceil(n * p + half))
    else:
        lo, hi = _binomial_ranks(n, p, alpha)
    return int(np.clip(lo, 0, n - 1)), int(np.clip(hi, 0, n - 1))


def _binomial_ranks(n: int, p: float, alpha: float) -> tuple[int, int]:
    """Exact: lo = the largest k with P(B <= k - 1) <= alpha, hi = the smallest k with
    P(B <= k - 1) >= 1 - alpha, for B ~ Binomial(n, p) (1-based order statistics, made 0-based).
    The pmf is computed in logs (log-factorials as running sums), so no term underflows."""
    if p <= 0:
        return 0, 0
    if p >= 1:
        return n - 1, n - 1
    log_fact = np.concatenate(([0.0], np.cumsum(np.log(np.arange(1, n + 1)))))
    k = np.arange(n + 1)
    log_pmf = log_fact[n] - log_fact[k] - log_fact[n - k] + k * np.log(p) + (n - k) * np.log1p(-p)
    below = np.concatenate(([0.0], np.cumsum(np.exp(log_pmf))))[: n + 1]  # P(B <= k - 1), k = 0..n
    lo = int(np.searchsorted(below, alpha, side="right")) - 1  # largest k with below[k] <= alpha
    hi_hits = np.nonzero(below >= 1 - alpha)[0]
    hi = int(hi_hits[0]) if len(hi_hits) else n + 1
    return lo - 1, hi - 1


def percentile_ci(sorted_values: np.ndarray, q: float, confidence: float = 0.95) -> tuple[float, float]:
    """Confidence interval of the q-th percentile (0-100); see percentile_cis."""
    return percentile_cis(sorted_values, [q], confidence)[0]


def describe(values: Sequence[float] | np.ndarray, with_ci: bool = True) -> Distribution:
    """Mean, spread and percentiles (linear interpolation, numpy's default) of the samples."""
    arr = np.sort(np.asarray(values, dtype=np.float64))
    n = len(arr)
    if n == 0:
        return Distribution(n=0)
    pcts = np.percentile(arr, PERCENTILES)
    dist = Distribution(
        n=n,
        mean=float(arr.mean()),
        std=float(arr.std(ddof=1)) if n > 1 else 0.0,
        min=float(arr[0]),
        max=float(arr[-1]),
    )
    cis = percentile_cis(arr, PERCENTILES) if with_ci else None
    for i, (p, v) in enumerate(zip(PERCENTILES, pcts, strict=True)):
        setattr(dist, f"p{p}", float(v))
        if cis is not None:
            dist.ci95[f"p{p}"] = cis[i]
        if not enough_samples(n, p):
            dist.low_sample.append(f"p{p}")
    return dist
