"""Shares with confidence intervals: Wilson score intervals for one arm, Newcombe's hybrid score
interval for the difference between two arms (B - A). Both behave at 0 and at small counts, where
the normal approximation gives empty or negative intervals. Where one event must not decide (a
validity rule on a short step), the exact Clopper-Pearson lower bound, which Wilson's undercuts at
small counts. Pure."""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np


def z_for(alpha: float) -> float:
    return NormalDist().inv_cdf(1 - alpha / 2)


def wilson(k: int, n: int, alpha: float = 0.05) -> tuple[float, float] | None:
    if n <= 0:
        return None
    z = z_for(alpha)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def exact_lower(k: int, n: int, alpha: float = 0.05) -> float:
    """Clopper-Pearson's two-sided lower bound: the share p at which k or more of n is as rare as
    alpha / 2. Never above Wilson's; one event of n >= 3 never lifts it past 1 %."""
    if n <= 0 or k <= 0:
        return 0.0
    k = min(k, n)
    lo, hi = 0.0, k / n
    for _ in range(60):  # bisection to well under 1e-12 of the share
        mid = (lo + hi) / 2
        if _tail_at_least(k, n, mid) > alpha / 2:
            hi = mid
        else:
            lo = mid
    return lo


def _tail_at_least(k: int, n: int, p: float) -> float:
    """P(X >= k) for X ~ Binomial(n, p), as 1 - P(X <= k - 1) summed in log space (O(k))."""
    if p <= 0.0:
        return 0.0
    if p >= 1.0:
        return 1.0
    j = np.arange(k - 1, dtype=float)
    steps = np.log(n - j) - np.log(j + 1) + math.log(p / (1 - p))
    log_pmf = n * math.log1p(-p) + np.concatenate(([0.0], np.cumsum(steps)))
    top = float(log_pmf.max())
    below = math.exp(top) * float(np.exp(log_pmf - top).sum())
    return max(0.0, 1.0 - below)


@dataclass(frozen=True, slots=True)
class Share:
    k: int
    n: int
    ci: tuple[float, float] | None

    @property
    def value(self) -> float | None:
        return self.k / self.n if self.n else None

    def to_dict(self) -> dict[str, Any]:
        return {"k": self.k, "n": self.n, "value": self.value, "ci": list(self.ci) if self.ci else None}


def share(k: int, n: int, alpha: float = 0.05) -> Share:
    return Share(k, n, wilson(k, n, alpha))


@dataclass(frozen=True, slots=True)
class ShareDiff:
    """B - A in absolute terms (0.005 = +0.5 percentage points)."""

    diff: float | None
    ci: tuple[float, float] | None

    def to_dict(self) -> dict[str, Any]:
        return {"diff": self.diff, "ci": list(self.ci) if self.ci else None}


def share_diff(a: Share, b: Share, alpha: float = 0.05) -> ShareDiff:
    """Newcombe (1998) method 10: the Wilson intervals of each arm combined."""
    if a.ci is None or b.ci is None or a.value is None or b.value is None:
        return ShareDiff(None, None)
    pa, pb = a.value, b.value
    (la, ua), (lb, ub) = a.ci, b.ci
    d = pb - pa
    lower = d - math.sqrt((pb - lb) ** 2 + (ua - pa) ** 2)
    upper = d + math.sqrt((ub - pb) ** 2 + (pa - la) ** 2)
    return ShareDiff(d, (max(-1.0, lower), min(1.0, upper)))
