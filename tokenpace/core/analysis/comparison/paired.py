"""Live against shadow on the *same* requests: per-request differences, not two samples.

A shadow copy (``gateway --mirror``) answers the very prompt its live request carried, at nearly
the same moment. Pairing them removes everything two independent samples must average away (prompt
and output lengths, prefix-cache state, the moment's load on the client side), so a much smaller
change is shown with the same number of requests.

Per metric, over the pairs where both sides answered: the median of shadow/live ratios with its
distribution-free 95 % interval (order statistics of the log ratios), and the median difference in
ms. The verdict rests on the interval, never on the point: slower when its lower bound is above
1 + ``min_effect``, faster when its upper bound is under 1 - ``min_effect``, the same within
``min_effect`` when it lies inside both, and undecided otherwise. Pure.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tokenpace.core.metrics import e2e_ns, tpot_ns, ttft_ns
from tokenpace.core.record import RequestRecord, Status
from tokenpace.core.stats import percentile_ci

MIRROR_OF = "mirror_of"  # the shadow record's label naming its live request's id
METRICS: tuple[tuple[str, Callable[[RequestRecord], float | None]], ...] = (
    ("ttft", ttft_ns),
    ("tpot", tpot_ns),
    ("e2e", e2e_ns),
)
MIN_PAIRS = 8  # fewer than this: no interval is worth printing


@dataclass(slots=True)
class PairedMetric:
    metric: str
    pairs: int
    median_diff_ms: float | None = None
    diff_ci_ms: tuple[float, float] | None = None
    median_ratio: float | None = None
    ratio_ci: tuple[float, float] | None = None
    verdict: str = "undecided"
    why: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "pairs": self.pairs,
            "median_diff_ms": self.median_diff_ms,
            "diff_ci95_ms": list(self.diff_ci_ms) if self.diff_ci_ms else None,
            "median_ratio": self.median_ratio,
            "ratio_ci95": list(self.ratio_ci) if self.ratio_ci else None,
            "verdict": self.verdict,
            "why": self.why,
        }


@dataclass(slots=True)
class PairedComparison:
    pairs: int  # shadow copies joined to their live request
    live_unmatched: int  # live requests with no shadow copy (not in the share, or dropped)
    failed: dict[str, int]  # pairs left out: which side did not answer ok
    min_effect: float
    metrics: list[PairedMetric] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "pairs": self.pairs,
            "live_unmatched": self.live_unmatched,
            "failed": self.failed,
            "min_effect": self.min_effect,
            "metrics": [m.to_dict() for m in self.metrics],
            "method": "per-request shadow/live ratios on the same requests; median with a "
            "distribution-free 95% interval (order statistics)",
        }


def is_shadow_of(live: Sequence[RequestRecord], shadow: Sequence[RequestRecord]) -> bool:
    """Whether ``shadow``'s records are copies of ``live``'s requests (at least one joins)."""
    ids = {r.request_id for r in live}
    return any(r.labels.get(MIRROR_OF) in ids for r in shadow)


def _metric(name: str, live: np.ndarray, shadow: np.ndarray, min_effect: float) -> PairedMetric:
    keep = (live > 0) & (shadow > 0)
    live, shadow = live[keep], shadow[keep]
    out = PairedMetric(name, len(live))
    if len(live) < MIN_PAIRS:
        out.why = f"{len(live)} pairs: at least {MIN_PAIRS} are needed for an interval"
        return out
    diffs = np.sort((shadow - live) / 1e6)
    logs = np.sort(np.log(shadow / live))
    out.median_diff_ms = float(np.median(diffs))
    out.diff_ci_ms = percentile_ci(diffs, 50)
    lo, hi = percentile_ci(logs, 50)
    out.median_ratio, out.ratio_ci = float(np.exp(np.median(logs))), (float(np.exp(lo)), float(np.exp(hi)))
    low, high = out.ratio_ci
    if low > 1 + min_effect:
        out.verdict, out.why = "slower", f"even the interval's low end is {low - 1:+.1%}"
    elif high < 1 - min_effect:
        out.verdict, out.why = "faster", f"even the interval's high end is {high - 1:+.1%}"
    elif low >= 1 - min_effect and high <= 1 + min_effect:
        out.verdict, out.why = "same", f"the interval lies within ±{min_effect:.0%}"
    else:
        width = (high - low) / 2
        more = int(np.ceil(len(live) * ((width / max(min_effect, 1e-9)) ** 2 - 1))) if width > 0 else 0
        out.why = (
            f"the interval [{low - 1:+.1%}, {high - 1:+.1%}] straddles ±{min_effect:.0%}; "
            f"about {max(more, 1):,} more pairs would narrow it enough"
        )
    return out


def paired_compare(
    live: Sequence[RequestRecord], shadow: Sequence[RequestRecord], min_effect: float = 0.05
) -> PairedComparison:
    """Shadow against live, request by request (positive: the shadow is slower)."""
    by_id = {r.request_id: r for r in live if not r.warmup}
    joined: list[tuple[RequestRecord, RequestRecord]] = []
    failed = {"live": 0, "shadow": 0}
    matched = 0
    for s in shadow:
        l = by_id.get(s.labels.get(MIRROR_OF, ""))  # noqa: E741
        if l is None:
            continue
        matched += 1
        if l.status is not Status.OK:
            failed["live"] += 1
        elif s.status is not Status.OK:
            failed["shadow"] += 1
        else:
            joined.append((l, s))
    result = PairedComparison(matched, len(by_id) - matched, failed, min_effect)
    for name, fn in METRICS:
        values = [(fn(l), fn(s)) for l, s in joined]  # noqa: E741
        both = [(a, b) for a, b in values if a is not None and b is not None]
        arr = np.array(both, dtype=float).reshape(-1, 2)
        result.metrics.append(_metric(name, arr[:, 0], arr[:, 1], min_effect))
    return result
