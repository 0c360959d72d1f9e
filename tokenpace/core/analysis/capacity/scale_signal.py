"""The article's scale-out signal across a sweep: the step where GPU utilisation passed 70 % and
the step where the engine's queue began to climb, beside the latency knee, and which came first.

Pure: the steps' result dicts (their ``gpu_metrics.steady`` and ``server_metrics.steady``, each a
mean over the step's steady window with a 95 % interval) in, decisions out. A step is above or
below a line only when its interval says so; otherwise it is undecided, and a crossing is then an
interval of steps (after the last step decided below, by the first decided above). Which comes first
is decided only when the two crossings' intervals do not overlap.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tokenpace.core.analysis.evidence.window_mean import WindowMean

UTIL_THRESHOLD_PCT = 70.0  # the article's line: utilisation past it while the queue climbs, scale out
QUEUE_MIN_WAITING = 1.0  # the queue climbs once at least one request waits, on average over the window


def _window(entry: dict[str, Any] | None) -> WindowMean | None:
    if not entry or entry.get("mean") is None:
        return None
    ci = entry.get("ci95")
    return WindowMean(
        float(entry["mean"]), (float(ci[0]), float(ci[1])) if ci else None, int(entry.get("n", 0))
    )


@dataclass(frozen=True, slots=True)
class Crossing:
    """Where, in load order, a line was passed: after position ``lo - 1`` and by position ``hi``
    (``hi`` None: at no step tried, or not known). ``decided``: one step names it."""

    lo: int
    hi: int | None
    decided: bool
    text: str


def _crossing(steps: Sequence[int], decisions: Sequence[str], what: str, why: str) -> Crossing:
    first = next((i for i, d in enumerate(decisions) if d == "above"), None)
    top = len(steps)
    below = [i for i, d in enumerate(decisions[: first if first is not None else top]) if d == "below"]
    lo = below[-1] + 1 if below else 0
    if first is None:
        if lo == top:
            return Crossing(top, top, True, f"{what}: at no step (below it up to step {steps[-1]})")
        open_ = ", ".join(str(steps[i]) for i in range(lo, top))
        return Crossing(lo, None, False, f"{what}: undecided (step(s) {open_}: {why})")
    if lo == first and below:
        return Crossing(first, first, True, f"{what}: at step {steps[first]} (step {steps[lo - 1]} below)")
    if lo == first:
        return Crossing(
            0, first, False, f"{what}: at step {steps[first]} or below it (the lowest load tried)"
        )
    open_ = ", ".join(str(steps[i]) for i in range(lo, first))
    after = f"after step {steps[lo - 1]}, " if below else ""
    return Crossing(
        lo, first, False, f"{what}: {after}by step {steps[first]} (step(s) {open_} undecided: {why})"
    )


def _order(a: Crossing, b: Crossing) -> str:
    """ "a", "b", "together" or "undecided": which crossing comes at a lower load."""
    if a.hi is not None and a.hi < b.lo:
        return "a"
    if b.hi is not None and b.hi < a.lo:
        return "b"
    if a.decided and b.decided and a.hi == b.hi:
        return "together"
    return "undecided"


def _step_row(step: int, d: dict[str, Any]) -> tuple[dict[str, Any], str, str]:
    gpu = (d.get("gpu_metrics") or {}).get("steady") or {}
    queue = (d.get("server_metrics") or {}).get("steady") or {}
    util, waiting = _window(gpu.get("util_pct")), _window(queue.get("waiting"))
    util_d = util.decide(UTIL_THRESHOLD_PCT) if util else "undecided"
    queue_d = waiting.decide(QUEUE_MIN_WAITING) if waiting else "undecided"
    row = {
        "step": step,
        "gpu_util_pct": util.to_dict() if util else None,
        "util_decision": util_d,
        "power_w": (gpu.get("power_w") or {}).get("mean"),
        "waiting": waiting.to_dict() if waiting else None,
        "queue_decision": queue_d,
    }
    return row, util_d, queue_d


def scale_signal(
    steps: Sequence[dict[str, Any]], order: Sequence[int], knee_step: int | None
) -> dict[str, Any] | None:
    """``order``: the usable steps (1-based) from the lowest load up; ``knee_step``: the plan's knee.
    None when no step read the GPUs nor the queue."""
    rows = [_step_row(s, steps[s - 1]) for s in order]
    if not any(r["gpu_util_pct"] or r["waiting"] for r, _, _ in rows):
        return None
    why = "the interval spans the line; longer steps would decide"
    util_what = f"GPU utilisation passed {UTIL_THRESHOLD_PCT:g} %"
    queue_what = f"the queue began to climb (>= {QUEUE_MIN_WAITING:g} waiting)"
    util = _crossing(order, [u for _, u, _ in rows], util_what, why)
    queue = _crossing(order, [q for _, _, q in rows], queue_what, why)
    named = {"a": "utilisation", "b": "queue", "together": "together", "undecided": "undecided"}
    first = "neither" if util.lo == queue.lo == len(order) else named[_order(util, queue)]
    hi = None if util.hi is None or queue.hi is None else max(util.hi, queue.hi)
    both = Crossing(max(util.lo, queue.lo), hi, util.decided and queue.decided, "")
    return {
        "util_threshold_pct": UTIL_THRESHOLD_PCT,
        "queue_min_waiting": QUEUE_MIN_WAITING,
        "steps": [r for r, _, _ in rows],
        "util_passed": _doc(util, order),
        "queue_climbed": _doc(queue, order),
        "first": first,
        "signal_vs_knee": _versus_knee(both, order, knee_step),
        "lines": [util.text, queue.text, _first_line(first, util, queue, order)],
    }


def _doc(c: Crossing, order: Sequence[int]) -> dict[str, Any]:
    top = len(order)
    return {
        "step": order[c.hi] if c.hi is not None and c.hi < top else None,
        "after_step": order[c.lo - 1] if 0 < c.lo <= top else None,
        "decided": c.decided,
        "text": c.text,
    }


def _first_line(first: str, util: Crossing, queue: Crossing, order: Sequence[int]) -> str:
    if first == "utilisation":
        return "Which comes first: GPU utilisation passed the line before the queue climbed"
    if first == "queue":
        return "Which comes first: the queue climbed before GPU utilisation passed the line"
    if first == "neither":
        return "Which comes first: neither line was passed at any step tried"
    if first == "together":
        return f"Which comes first: neither, both at step {order[util.hi or 0]}"
    return "Which comes first: undecided (the two crossings' step intervals overlap)"


def _versus_knee(both: Crossing, order: Sequence[int], knee_step: int | None) -> dict[str, Any]:
    """The scale-out signal (utilisation past the line and the queue climbing) against the knee."""
    if knee_step is None or knee_step not in order:
        return {
            "knee_step": knee_step,
            "order": "undecided",
            "text": "Scale-out signal vs knee: no knee to compare",
        }
    k = order.index(knee_step)
    if both.lo >= len(order):
        order_ = "knee first"
        text = f"the latency knee (step {knee_step}) came; the scale-out signal at no step tried"
    elif both.hi is not None and both.hi < k:
        order_ = "signal first"
        text = f"the scale-out signal comes before the latency knee (step {knee_step}): it leads"
    elif both.lo > k:
        order_ = "knee first"
        text = f"the latency knee (step {knee_step}) comes before the scale-out signal: it lags"
    elif both.decided and both.hi == k:
        order_ = "together"
        text = f"the scale-out signal and the latency knee both at step {knee_step}"
    else:
        order_ = "undecided"
        text = f"undecided against the latency knee (step {knee_step}): the signal's step interval holds it"
    return {"knee_step": knee_step, "order": order_, "text": "Scale-out signal vs knee: " + text}
