"""E-divisive change-point detection with a permutation significance test. Pure, seeded.

After Matteson & James (2014), "A nonparametric approach for multiple change point analysis of
multivariate data", as used for performance histories (Daly et al., MongoDB, ICPE 2020): binary
segmentation on the energy-distance statistic

    Q(tau) = L*R/(L+R) * (2 E|X-Y| - E|X-X'| - E|Y-Y'|)

between the values left (X, L of them) and right (Y, R of them) of a candidate split, taken at its
maximum. A split is kept only when a permutation test says the maximum is larger than the maxima of
shuffled copies of the segment: p = (1 + #shuffles with a maximum at least as large) / (1 + shuffles).
Under no change, the values are exchangeable and the chance of a false alarm in a series is at most
``alpha`` (later splits are only tested after a first was found).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import numpy as np

DEFAULT_ALPHA = 0.05
DEFAULT_PERMUTATIONS = 199
DEFAULT_MIN_SIZE = 5


@dataclass(frozen=True, slots=True)
class ChangePoint:
    index: int  # position of the first value after the shift
    p_value: float
    statistic: float
    before: float  # median of the segment before
    after: float  # median of the segment after
    rel_change: float | None  # after / before - 1

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "p_value": self.p_value,
            "statistic": self.statistic,
            "before": self.before,
            "after": self.after,
            "rel_change": self.rel_change,
        }


def split_statistics(x: np.ndarray, min_size: int) -> np.ndarray:
    """Q(tau) for tau = min_size .. len(x) - min_size (index 0 is tau = min_size)."""
    m = len(x)
    d = np.abs(x[:, None] - x[None, :])
    p = np.zeros((m + 1, m + 1))
    p[1:, 1:] = d.cumsum(0).cumsum(1)
    tau = np.arange(min_size, m - min_size + 1)
    left = tau.astype(np.float64)
    right = (m - tau).astype(np.float64)
    within_left = p[tau, tau]
    between = p[tau, m] - p[tau, tau]
    within_right = p[m, m] - 2 * p[tau, m] + p[tau, tau]  # d is symmetric
    energy = (
        2 * between / (left * right)
        - within_left / (left * (left - 1))
        - within_right / (right * (right - 1))
    )
    statistic: np.ndarray = left * right / m * energy
    return statistic


def best_split(x: np.ndarray, min_size: int) -> tuple[int, float] | None:
    if len(x) < 2 * min_size:
        return None
    q = split_statistics(x, min_size)
    k = int(np.argmax(q))
    return k + min_size, float(q[k])


def _permutation_p(
    x: np.ndarray, observed: float, min_size: int, permutations: int, rng: np.random.Generator
) -> float:
    at_least = 0
    for _ in range(permutations):
        q = split_statistics(rng.permutation(x), min_size)
        if q.max() >= observed - 1e-12 * abs(observed):
            at_least += 1
    return (1 + at_least) / (1 + permutations)


def e_divisive(
    values: Sequence[float] | np.ndarray,
    alpha: float = DEFAULT_ALPHA,
    permutations: int = DEFAULT_PERMUTATIONS,
    min_size: int = DEFAULT_MIN_SIZE,
    seed: int = 0,
    max_points: int | None = None,
) -> list[ChangePoint]:
    """Significant level shifts in ``values`` (ordered in time), sorted by position."""
    if min_size < 2:
        raise ValueError("min_size must be at least 2")
    x = np.asarray(values, dtype=np.float64)
    if not np.all(np.isfinite(x)):
        raise ValueError("values must be finite numbers")
    rng = np.random.default_rng(seed)
    bounds = [0, len(x)]
    found: dict[int, tuple[float, float]] = {}
    tested: dict[tuple[int, int], tuple[int, float] | None] = {}
    while max_points is None or len(found) < max_points:
        candidates: list[tuple[tuple[int, int], tuple[int, float]]] = []
        for s, e in pairwise(bounds):
            if (s, e) not in tested:
                split = best_split(x[s:e], min_size)
                tested[(s, e)] = None if split is None else (s + split[0], split[1])
            if (best := tested[(s, e)]) is not None:
                candidates.append(((s, e), best))
        if not candidates:
            break
        (s, e), (tau, stat) = max(candidates, key=lambda c: c[1][1])
        p = _permutation_p(x[s:e], stat, min_size, permutations, rng)
        if p > alpha:
            break
        found[tau] = (p, stat)
        bounds = sorted([*bounds, tau])
    points = []
    for i, b in enumerate(bounds[1:-1], start=1):
        before = float(np.median(x[bounds[i - 1] : b]))
        after = float(np.median(x[b : bounds[i + 1]]))
        p, stat = found[b]
        points.append(ChangePoint(b, p, stat, before, after, after / before - 1 if before else None))
    return points
