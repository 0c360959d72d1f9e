"""The release gate: thresholds like ``ttft.p95=5%`` checked against a comparison. Pure."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tokenpace.core.analysis.compare import Comparison, pct_name
from tokenpace.core.analysis.samples import METRICS
from tokenpace.core.analysis.verdict import Verdict, worse

_ITEM = re.compile(r"^\s*([a-z0-9_]+)\.p(\d+(?:\.\d+)?)\s*=\s*(\d+(?:\.\d+)?)\s*%\s*$")


@dataclass(frozen=True, slots=True)
class Threshold:
    metric: str
    q: float
    limit: float  # largest relative regression allowed, 0.05 for 5%

    @property
    def name(self) -> str:
        return f"{self.metric}.{pct_name(self.q)}"


def parse_thresholds(text: str) -> list[Threshold]:
    """``"ttft.p95=5%,e2e.p99=10%"`` -> thresholds. Raises ValueError with a message for the user."""
    out: list[Threshold] = []
    for part in (p for p in text.split(",") if p.strip()):
        m = _ITEM.match(part.lower())
        if not m:
            raise ValueError(
                f"{part.strip()!r}: expected METRIC.pNN=X%, e.g. ttft.p95=5% (metrics: {', '.join(METRICS)})"
            )
        metric, q, limit = m.group(1), float(m.group(2)), float(m.group(3)) / 100
        if metric not in METRICS:
            raise ValueError(f"{part.strip()!r}: unknown metric {metric!r}; known: {', '.join(METRICS)}")
        if not 0 < q < 100:
            raise ValueError(f"{part.strip()!r}: the percentile must be between 0 and 100")
        out.append(Threshold(metric, q, limit))
    if not out:
        raise ValueError("no threshold given; e.g. --max-regression ttft.p95=5%,e2e.p99=10%")
    return out


@dataclass(slots=True)
class GateItem:
    threshold: Threshold
    baseline: float | None
    candidate: float | None
    rel: float | None
    rel_ci: tuple[float | None, float | None] | None
    significant: bool
    verdict: Verdict
    outcome: str  # "pass", "regressed", "undecided"
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "check": self.threshold.name,
            "max_regression": self.threshold.limit,
            "baseline": self.baseline,
            "candidate": self.candidate,
            "rel_change": self.rel,
            "rel_ci": list(self.rel_ci) if self.rel_ci else None,
            "significant": self.significant,
            "verdict": self.verdict.value,
            "outcome": self.outcome,
            "reason": self.reason,
        }


def evaluate(comparison: Comparison, thresholds: Sequence[Threshold]) -> list[GateItem]:
    """Regressed = worse by more than the threshold AND significant (CI of the difference excludes 0)."""
    items = []
    for t in thresholds:
        m = comparison.metric(t.metric)
        row = m.row(pct_name(t.q))
        if row is None or row.verdict is Verdict.TOO_FEW or row.ci is None:
            n = min(m.n_a, m.n_b)
            reason = (
                f"too few samples for {t.name} ({n}); it needs at least 5 beyond the percentile, "
                f"so runs of {requests_needed(t.q)}+ requests (or gate a lower percentile)"
            )
            items.append(GateItem(t, None, None, None, None, False, Verdict.TOO_FEW, "undecided", reason))
            continue
        significant = row.ci[0] > 0 or row.ci[1] < 0
        is_worse = worse(row.diff or 0.0, m.higher_is_better)
        change = abs(row.rel) if row.rel is not None else float("inf")
        regressed = significant and is_worse and change > t.limit
        if regressed:
            reason = f"{_pct(row.rel)} worse, above the {t.limit:.0%} allowed, and significant"
        elif is_worse and change > t.limit:
            reason = f"{_pct(row.rel)} worse but not significant at level {comparison.alpha:g}"
        elif is_worse and significant:
            reason = f"{_pct(row.rel)} worse: significant, within the {t.limit:.0%} allowed"
        else:
            reason = f"{_pct(row.rel)}: not a regression"
        items.append(
            GateItem(
                t,
                row.a,
                row.b,
                row.rel,
                row.rel_ci,
                significant,
                row.verdict,
                "regressed" if regressed else "pass",
                reason,
            )
        )
    return items


def requests_needed(q: float) -> int:
    """The fewest samples with 5 beyond percentile ``q`` (p99: 500, p95: 100)."""
    return math.ceil(round(5 / (1 - q / 100), 6)) if q < 100 else 0


def _pct(rel: float | None) -> str:
    return "n/a" if rel is None else f"{rel:+.1%}"
