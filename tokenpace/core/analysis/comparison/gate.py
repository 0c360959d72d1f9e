"""The release gate: thresholds like ``ttft.p95=5%`` checked against a comparison. Pure."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tokenpace.core.analysis.comparison.compare import Comparison, pct_name
from tokenpace.core.analysis.evidence.runchange import against
from tokenpace.core.analysis.evidence.runnoise import RunNoise
from tokenpace.core.analysis.evidence.samples import METRICS
from tokenpace.core.analysis.evidence.verdict import Verdict

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
    significant: bool  # the interval excludes no change at all
    verdict: Verdict
    outcome: str  # "pass", "regressed", "undecided"
    reason: str
    detectable: float | None = None  # smallest worsening called 9 times in 10 at this size and noise
    runs_needed: int | None = None
    noise: RunNoise | None = None

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
            "detectable": self.detectable,
            "runs_needed": self.runs_needed,
            "run_noise": self.noise.to_dict() if self.noise else None,
        }


@dataclass(frozen=True, slots=True)
class LeftOut:
    """The runs the sides measured and how many of them were left out (NOT VALID, interrupted): the
    runs an undecided gate asks for are judged runs, so its advice plans for the same share lost."""

    measured: int
    left_out: int

    def planned(self, judged: int) -> int:
        """Runs to measure for ``judged`` of them to be judged, at the share left out so far."""
        kept = self.measured - self.left_out
        return judged if not self.left_out or kept <= 0 else math.ceil(judged * self.measured / kept)

    def note(self, judged: int) -> str:
        if not self.left_out:
            return ""
        return (
            f"; {self.left_out} of the {self.measured} runs measured were left out (NOT VALID or "
            f"interrupted), so measure about {self.planned(judged)} for {judged} to be judged"
        )


def evaluate(
    comparison: Comparison, thresholds: Sequence[Threshold], left_out: LeftOut | None = None
) -> list[GateItem]:
    """Regressed when the whole interval of the change lies beyond the threshold on the worse side;
    pass when it lies entirely short of it at a noise between runs that was measured (never an
    assumed one alone); undecided when it holds the threshold, with the runs a side that would
    decide it (more where runs were left out: ``left_out``)."""
    lost = left_out or LeftOut(0, 0)
    items = []
    for t in thresholds:
        m = comparison.metric(t.metric)
        row = m.row(pct_name(t.q))
        if row is None or row.verdict is Verdict.TOO_FEW or row.change is None or row.rel_ci is None:
            n = min(m.n_a, m.n_b)
            reason = (
                f"too few samples for {t.name} ({n}); it needs at least 5 beyond the percentile, "
                f"so runs of {requests_needed(t.q)}+ requests (or gate a lower percentile)"
            )
            items.append(GateItem(t, None, None, None, None, False, Verdict.TOO_FEW, "undecided", reason))
            continue
        ch = against(row.change, t.limit, m.higher_is_better, one_sided=True)
        lo, hi = ch.rel_lo or 0.0, ch.rel_hi or 0.0
        # Worse is up for latencies, down for throughput: look at the interval from that side.
        near, far = (-hi, -lo) if m.higher_is_better else (lo, hi)
        significant = lo > 0 or hi < 0
        if near > t.limit:
            outcome, reason = (
                "regressed",
                f"{_pct(ch.rel)} [{_pct(lo)}, {_pct(hi)}]: all of it beyond the {t.limit:.0%} allowed",
            )
        elif far < t.limit and row.noise is not None and row.noise.rests_on_assumption:
            outcome, reason = "undecided", _assumed(ch.rel, lo, hi, t.limit, row.noise, lost)
        elif far < t.limit:
            outcome, reason = (
                "pass",
                f"{_pct(ch.rel)} [{_pct(lo)}, {_pct(hi)}]: all of it within the {t.limit:.0%} allowed",
            )
        else:
            outcome, reason = "undecided", _undecided(ch.rel, lo, hi, t.limit, ch.runs_needed, lost)
        items.append(
            GateItem(
                t,
                row.a,
                row.b,
                ch.rel,
                (lo, hi),
                significant,
                row.verdict,
                outcome,
                reason,
                ch.detectable,
                ch.runs_needed,
                row.noise,
            )
        )
    return items


def _assumed(rel: float | None, lo: float, hi: float, limit: float, noise: RunNoise, lost: LeftOut) -> str:
    host = f" on a {noise.host} host" if noise.host else ""
    return (
        f"{_pct(rel)} [{_pct(lo)}, {_pct(hi)}] lies within the {limit:.0%} allowed only at an assumed "
        f"noise between runs ({noise.rel_sd:.1%}): no run of this test{host} measured it, so a pass "
        "would rest on an assumption; stored runs of the same test under these conditions, or 2+ runs "
        f"a side (bench --repeat {lost.planned(3)}, check --until-decided), would decide it{lost.note(3)}"
    )


def _undecided(rel: float | None, lo: float, hi: float, limit: float, runs: int | None, lost: LeftOut) -> str:
    head = f"{_pct(rel)} [{_pct(lo)}, {_pct(hi)}] holds the {limit:.0%} allowed"
    if math.isinf(hi) or lo <= -1:
        return (
            f"{head}: its requests moved together, leaving too few effective ones beyond the "
            "percentile to bound the interval on one side; longer runs (more requests) would decide"
        )
    if runs is None:
        return f"{head}: even a truth at its far end would take more than 50 runs a side to decide"
    return (
        f"{head}: about {runs} judged runs a side would decide it if the truth lies where the interval "
        f"reaches farthest from the threshold (bench --repeat {lost.planned(runs)}){lost.note(runs)}"
    )


def requests_needed(q: float) -> int:
    """The fewest samples with 5 beyond percentile ``q`` (p99: 500, p95: 100)."""
    return math.ceil(round(5 / (1 - q / 100), 6)) if q < 100 else 0


def _pct(rel: float | None) -> str:
    return "n/a" if rel is None else "unbounded" if math.isinf(rel) else f"{rel:+.1%}"
