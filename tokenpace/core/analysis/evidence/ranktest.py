"""Mann-Whitney U rank test, two-sided, normal approximation with tie and continuity correction.

Implemented with numpy rather than pulling in scipy for one function: the samples compared here
are request latencies, tens to millions of them, where the normal approximation is accurate
(it is what scipy uses too beyond small samples). For fewer than 8 values a side the p-value is
reported but the comparison refuses a verdict anyway (too few samples for any percentile).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, slots=True)
class RankTest:
    u: float  # U statistic of the second sample (B)
    z: float
    p_value: float
    prob_b_greater: float  # P(B > A) + P(B = A)/2: 0.5 when neither side tends to be larger


def rankdata(values: np.ndarray) -> np.ndarray:
    """Ranks 1..n, ties given their average rank."""
    order = np.argsort(values, kind="mergesort")
    sorted_vals = values[order]
    # Start of each run of equal values.
    new = np.empty(len(values), dtype=bool)
    new[:1] = True
    new[1:] = sorted_vals[1:] != sorted_vals[:-1]
    starts = np.flatnonzero(new)
    ends = np.append(starts[1:], len(values))
    avg = (starts + ends + 1) / 2.0  # average of ranks starts+1 .. ends
    run_of = np.cumsum(new) - 1
    ranks = np.empty(len(values), dtype=np.float64)
    ranks[order] = avg[run_of]
    return ranks


def mann_whitney(a: np.ndarray, b: np.ndarray) -> RankTest | None:
    """Two-sided test that A and B come from the same distribution. None if a side is empty."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    n1, n2 = len(a), len(b)
    if n1 == 0 or n2 == 0:
        return None
    ranks = rankdata(np.concatenate([a, b]))
    r2 = float(ranks[n1:].sum())
    u2 = r2 - n2 * (n2 + 1) / 2.0
    mu = n1 * n2 / 2.0
    n = n1 + n2
    _, counts = np.unique(np.concatenate([a, b]), return_counts=True)
    tie_term = float(((counts.astype(np.float64) ** 3) - counts).sum())
    var = n1 * n2 / 12.0 * ((n + 1) - tie_term / (n * (n - 1))) if n > 1 else 0.0
    if var <= 0:  # every value equal: no evidence of any difference
        return RankTest(u2, 0.0, 1.0, 0.5)
    diff = u2 - mu
    corrected = max(abs(diff) - 0.5, 0.0)  # continuity correction
    z = math.copysign(corrected / math.sqrt(var), diff)
    p = math.erfc(abs(z) / math.sqrt(2.0))
    return RankTest(u2, z, min(1.0, p), u2 / (n1 * n2))
