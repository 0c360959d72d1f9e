"""Use case: a gateway session's arms over time (``tokenpace arms --html``, the console's rollout
page): the window's records per arm with their send times (``arms.read_traffic``, one read of the
store), bucketed by ``core.analysis.rollout.timeline``, each configuration change a marker, and the
guards' verdict on each step of the rollout (each stretch between two moves of the split, cut from
the same read and judged as ``arms`` judges it: ``arms.judge``; the newest ``MAX_SEGMENTS`` of them)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tokenpace.adapters.safe_files import check_output
from tokenpace.adapters.store import Store
from tokenpace.app.rollout.arms import ArmsQuery, Traffic, cut, judge, read_traffic
from tokenpace.core.analysis.rollout.timeline import arms_timeline
from tokenpace.core.events import ConfigChange

MAX_SEGMENTS = 6  # rollout steps judged (each one bootstraps the latency its guards read)


@dataclass(slots=True)
class ArmsOverTime:
    since_unix: float
    until_unix: float
    timeline: dict[str, Any]  # core.analysis.rollout.timeline.arms_timeline
    steps: list[dict[str, Any]] = field(default_factory=list)  # each step's verdict, oldest first
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "since_unix": self.since_unix,
            "until_unix": self.until_unix,
            "timeline": self.timeline,
            "steps": self.steps,
            "warnings": list(self.warnings),
        }


def _step(lo: float, hi: float | None, verdict: Any = None, reason: str = "") -> dict[str, Any]:
    return {"since_unix": lo, "until_unix": hi, "verdict": verdict, "reason": reason, "guards": []}


def arms_over_time(store: Store, query: ArmsQuery, traffic: Traffic | None = None) -> ArmsOverTime:
    """Raises ValueError (one line for the user) when the window holds no gateway traffic.
    ``traffic``: the query's window already read (``read_traffic``), else read here: once for the
    timeline and every step."""
    traffic = traffic or read_traffic(store, query)
    since_unix, until_unix = query.since_unix, query.until_unix
    window = cut(traffic, since_unix, until_unix)
    if not window.records:
        raise ValueError(
            "no gateway traffic stored in this window (tokenpace gateway stores it; widen --since)"
        )
    changes = traffic.changes
    # the view ends with the window, or (open) just after the newest request or event in it
    seen = [t for times in window.sent_unix.values() for t in times] + [e.unix_s for e in window.events]
    end = until_unix if until_unix is not None else max(seen) + 1.0
    pairs = {arm: list(zip(window.sent_unix[arm], recs, strict=True)) for arm, recs in window.records.items()}
    out = ArmsOverTime(since_unix, end, arms_timeline(pairs, window.events, changes, since_unix, end))
    out.warnings = list(window.warnings)
    moved = [c.unix_s for c in changes if ConfigChange.weights(c.before) != ConfigChange.weights(c.after)]
    ends: list[float | None] = [*moved, until_unix]  # the last step open, as arms judges it
    spans = [(lo, hi) for lo, hi in zip([since_unix, *moved], ends, strict=True) if hi is None or hi > lo]
    spans = spans[-MAX_SEGMENTS:]
    if len(moved) >= MAX_SEGMENTS:
        out.warnings.append(f"the split moved {len(moved)} times: the newest {MAX_SEGMENTS} steps are judged")
    for lo, hi in spans:
        try:
            _, report = judge(traffic, lo, hi, guarded_only=True)  # a step shows its guards only
        except ValueError as exc:  # no traffic in that step
            out.steps.append(_step(lo, hi, None, str(exc)))
            continue
        step = _step(lo, hi, report.verdict, report.reason)
        step["guards"] = [g.to_dict() for g in report.guards]
        step["split_broken"] = report.split_broken
        step["reference"] = report.reference
        out.steps.append(step)
    return out


def write_arms_html(path: Path, doc: dict[str, Any], title: str | None = None) -> None:
    """The arms-over-time page as one offline file (refused like any output path: a device, a pipe,
    a folder that cannot be written)."""
    from tokenpace.adapters.report.arms_html import render_arms_html  # plotly: only when asked

    check_output(path, "--html")
    path.write_text(render_arms_html(doc, title), encoding="utf-8")
