"""Sample-ratio mismatch: are users (or requests) split over the arms as the weights say?

A chi-square goodness-of-fit test of the observed counts against the configured weights. A p-value
below 0.001 means the split is broken (sticky keys that collide, a router bug, one arm failing
requests before they are recorded, bots on one arm): every other comparison of the arms is then
suspect, so it is reported first. Pure."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

SRM_THRESHOLD = 0.001


def chi2_sf(x: float, df: int) -> float:
    """P(X >= x) for a chi-square variable with ``df`` (a positive integer) degrees of freedom."""
    if df < 1:
        raise ValueError("degrees of freedom must be positive")
    if x <= 0:
        return 1.0
    if math.isinf(x):
        return 0.0
    half = x / 2
    if df % 2 == 0:  # Q = exp(-x/2) * sum_{i < df/2} (x/2)^i / i!
        term, total = 1.0, 1.0
        for i in range(1, df // 2):
            term *= half / i
            total += term
        return min(1.0, math.exp(-half) * total)
    total = math.erfc(math.sqrt(half))  # df = 1, then the odd terms up to df
    term = math.sqrt(half) * math.exp(-half) / math.gamma(1.5)
    for i in range(1, (df + 1) // 2):
        total += term
        term *= half / (i + 0.5)
    return min(1.0, max(0.0, total))


@dataclass(frozen=True, slots=True)
class SrmResult:
    unit: str  # "users" or "requests"
    observed: dict[str, int]
    expected: dict[str, float]
    chi2: float
    df: int
    p_value: float
    flagged: bool
    judged: bool = True  # False: shown only (requests clustered by user are not independent)

    def to_dict(self) -> dict[str, Any]:
        return {
            "unit": self.unit,
            "observed": self.observed,
            "expected": self.expected,
            "chi2": self.chi2,
            "df": self.df,
            "p_value": self.p_value,
            "flagged": self.flagged,
            "judged": self.judged,
            "threshold": SRM_THRESHOLD,
        }


def srm_check(
    counts: Mapping[str, int],
    weights: Mapping[str, float],
    unit: str,
    threshold: float = SRM_THRESHOLD,
    judged: bool = True,
) -> SrmResult | None:
    """None when it cannot be tested: no weights, fewer than two arms, or nothing counted. A test
    that is not ``judged`` is computed and shown but never flags the split."""
    arms = sorted(set(weights) | set(counts))
    total_weight = sum(max(0.0, weights.get(a, 0.0)) for a in arms)
    total = sum(counts.get(a, 0) for a in arms)
    if total_weight <= 0 or total == 0 or len(arms) < 2:
        return None
    observed = {a: counts.get(a, 0) for a in arms}
    expected = {a: total * max(0.0, weights.get(a, 0.0)) / total_weight for a in arms}
    chi2 = 0.0
    for a in arms:
        if expected[a] > 0:
            chi2 += (observed[a] - expected[a]) ** 2 / expected[a]
        elif observed[a] > 0:
            chi2 = math.inf  # traffic on an arm that should get none
    df = sum(1 for a in arms if expected[a] > 0) - 1
    if df < 1:
        p = 0.0 if math.isinf(chi2) else 1.0
        return SrmResult(unit, observed, expected, chi2, max(df, 0), p, judged and p < threshold, judged)
    p = chi2_sf(chi2, df)
    return SrmResult(unit, observed, expected, chi2, df, p, judged and p < threshold, judged)
