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

# Bootstrap budget: resamples x sample size. Larger samples use the order-statistic interval,
# which is distribution-free and, at that size, as good as a bootstrap.
_BOOTSTRAP_RESAMPLES = 1000
_BOOTSTRAP_BUDGET = 4_000_000
_BOOTSTRAP_SEED = 20240601
_BATCH_ELEMENTS = 250_000


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
        return getattr(self, name)

    def to_dict(self) -> dict:
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


def enough_samples(n: int, percentile: float) -> bool:
    """True when at least MIN_TAIL_SAMPLES observations lie beyond the percentile."""
    tail = min(percentile, 100 - percentile) / 100
    return n * tail >= MIN_TAIL_SAMPLES


def percentile_cis(
    sorted_values: np.ndarray, qs: Sequence[float], confidence: float = 0.95
) -> list[tuple[float, float]]:
    """Confidence intervals of several percentiles (0-100) of one sample.

    Bootstrap (percentile method) for samples that fit the budget, one set of resamples shared by
    all percentiles; the order-statistic interval (normal approximation to the binomial count
    below the percentile) beyond it.
    """
    n = len(sorted_values)
    if n == 1:
        v = float(sorted_values[0])
        return [(v, v)] * len(qs)
    alpha = (1 - confidence) / 2
    if n * _BOOTSTRAP_RESAMPLES <= _BOOTSTRAP_BUDGET:
        rng = np.random.default_rng(_BOOTSTRAP_SEED)
        batch = max(1, _BATCH_ELEMENTS // n)  # resamples per batch: bounded memory
        stats = np.concatenate(
            [
                np.percentile(
                    sorted_values[rng.integers(0, n, size=(min(batch, _BOOTSTRAP_RESAMPLES - i), n))],
                    qs,
                    axis=1,
                ).T
                for i in range(0, _BOOTSTRAP_RESAMPLES, batch)
            ]
        )  # shape (resamples, len(qs))
        bounds = np.quantile(stats, [alpha, 1 - alpha], axis=0)
        return [(float(lo), float(hi)) for lo, hi in bounds.T]
    z = NormalDist().inv_cdf(1 - alpha)
    out = []
    for q in qs:
        p = q / 100
        half = z * np.sqrt(n * p * (1 - p))
        lo_rank = int(np.clip(np.floor(n * p - half), 0, n - 1))
        hi_rank = int(np.clip(np.ceil(n * p + half), 0, n - 1))
        out.append((float(sorted_values[lo_rank]), float(sorted_values[hi_rank])))
    return out


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
