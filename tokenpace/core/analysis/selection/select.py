"""Selection against a scenario: place each candidate at the scenario's load and judge every line.

Pure: stored runs (their conditions and summaries, the ``bench --out`` format) and the count of
requests meeting the scenario's lines in, a pass/fail matrix with a reason per cell out.

The rule: a line passes only when the *upper bound* of the 95 % confidence interval of its
percentile is under the threshold; it fails only when the percentile itself is at or over the line;
between the two (meets on its estimate, not yet proven) it is undecided. Judged at the scenario's
load or a higher one of the same kind. A rate scenario is judged only on open-loop steps (arrivals
of its kind) at or above its rate; a concurrency scenario only on closed-loop steps at or above its
concurrency. In a sweep the lowest such valid step judges: a higher load bounds the latency at a
lower one, and nothing between two steps is guessed (latency is not linear in load near a slot
limit: a straight line between two steps can sit far under what that load really gives). Beyond the
highest step nothing is trusted: measure it. A single run counts only if it ran at the scenario's
load (same loop, at it or up to 10 % above); anything else is "not enough evidence", never a pass.
Runs marked not valid, interrupted, without a successful request, too short to reach a steady state,
or that Little's law shows did not run at their stated load are left out, as plan leaves them out; a
percentile with fewer than 5 samples beyond it is "too few requests", not a verdict. A line met on an
open-loop run whose queue grew through it (Little's law: overloaded) is undecided: a longer run sees
a longer queue. So is a line met on an open-loop run that has not shown its steady state
(``settled``: enough effective requests, its late half's bound, its growth from the early half).
Where the step
that would judge the scenario's load is left out (a predicted step past what its profile vouches for
among them) and no valid step above it can, the verdict is undecided with that step's reason.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from tokenpace.core.analysis.capacity.little import little_check
from tokenpace.core.analysis.capacity.loadpoint import LoadPoint, point_from_result
from tokenpace.core.analysis.selection.scenarios import Scenario, SloLine
from tokenpace.core.analysis.selection.settled import HALVES, unsettled
from tokenpace.core.stats import MIN_TAIL_SAMPLES, ci_from_json

LOAD_TOLERANCE = 0.10  # a run within 10 % of the scenario's load is at it
LENGTH_TOLERANCE = 0.25  # a workload further off the scenario's lengths gets a warning


@dataclass(frozen=True, slots=True)
class RunPoint:
    """One stored run reduced to what selection needs; ``values`` is flat (``ttft_ms.p95.hi``)."""

    run_id: str
    mode: str  # closed_loop | open_loop
    offered: float | None  # concurrency or requests/s
    left_out: str  # why it cannot be judged ("" when usable)
    values: dict[str, float]
    low_sample: frozenset[str]  # "ttft_ms.p95": too few samples beyond that percentile
    caveat: str = ""  # why a line met on this run is not proven (its queue grew: Little's law)

    def axis(self, scenario: Scenario) -> float | None:
        """Where the run sits on the scenario's load axis (req/s or concurrency), if it is a load of
        the scenario's kind: open-loop arrivals for a rate, closed-loop users for a concurrency."""
        if scenario.rate is not None:
            return self.offered if self.mode == "open_loop" else None
        return self.offered if self.mode == "closed_loop" else None


def run_point(run_id: str, result: Mapping[str, Any], good: int | None = None) -> RunPoint:
    """``result``: conditions, summary, valid, interrupted (and, where the records gave them,
    ``time_trend``, for Little's law's check of a growing queue, and ``halves``, for the check that
    an open-loop run reached its steady state: ``settled``). ``good``: measured requests meeting
    every line of the scenario (from the records), for attainment and goodput. Like plan, an
    open-loop run is judged on TTFT and E2E from the scheduled send time: what a user arriving on
    schedule sees, client queueing included."""
    lp = point_from_result(1, dict(result))
    summary = result.get("summary") or {}
    values: dict[str, float] = {"achieved_rps": lp.achieved_rps, "error_rate": lp.error_rate}
    low: set[str] = set()
    scheduled = lp.slo_basis == "scheduled"
    _flatten(summary, scheduled, "", values, low)
    split = result.get("halves") or {}  # an open-loop run's (settled.halves)
    for half in HALVES:
        _flatten(split.get(half) or {}, scheduled, f".{half}", values, low)
    for name in ("prompt_tokens", "output_tokens"):
        mean = (summary.get(name) or {}).get("mean")
        if mean is not None:
            values[name] = float(mean)
    window = float(summary.get("window_s") or 0.0)  # the whole window: ``good`` counts every request
    if good is not None and lp.sent:
        values["attainment"] = good / lp.sent
        values["good_rps"] = good / window if window > 0 else 0.0
    little = little_check(lp)
    caveat = f"the queue grew through the run ({little.note})" if little.status == "overloaded" else ""
    return RunPoint(run_id, lp.mode, lp.offered, _left_out(lp, little.status, little.note), values,
                    frozenset(low), caveat)  # fmt: skip


def _flatten(summary: Mapping[str, Any], scheduled: bool, suffix: str, values: dict[str, float],
             low: set[str]) -> None:  # fmt: skip
    """Percentiles, their intervals and effective sample sizes as ``ttft_ms.p95{suffix}`` (``.lo``,
    ``.hi``, ``.n_eff``); a percentile on too few requests goes to ``low``."""
    for metric in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"):
        source = (
            metric.replace("_ms", "_from_scheduled_ms")
            if scheduled and metric[:3] in ("ttf", "e2e")
            else metric
        )
        dist = summary.get(source) or {}
        for pct in ("p50", "p90", "p95", "p99"):
            key = f"{metric}.{pct}{suffix}"
            if dist.get(pct) is not None:
                values[key] = float(dist[pct])
            ci = ci_from_json((dist.get("ci95") or {}).get(pct))
            if ci:  # a side the run cannot bound: infinite, so that it never passes a line
                values[f"{key}.lo"], values[f"{key}.hi"] = ci
            n_eff = (dist.get("n_eff") or {}).get(pct)
            if n_eff is not None:
                values[f"{key}.n_eff"] = float(n_eff)
            if pct in (dist.get("low_sample") or []):
                low.add(key)


def _left_out(lp: LoadPoint, little: str, note: str) -> str:
    """Why a run is never judged: plan's reasons (no success, NOT VALID, interrupted, too short to
    reach a steady state), or Little's law showing it did not run at its stated load."""
    if lp.left_out_reasons:
        return ", ".join(lp.left_out_reasons)
    if little == "inconsistent":
        return f"not at its stated load ({note})"
    return ""


# --- placing a candidate at the scenario's load ------------------------------------------------


@dataclass(frozen=True, slots=True)
class Placement:
    trusted: bool
    where: str  # how the numbers were obtained, or why none are trusted
    values: dict[str, float] = field(default_factory=dict)
    low_sample: frozenset[str] = frozenset()
    runs: tuple[str, ...] = ()  # the run(s) the numbers come from, highest load last
    caveat: str = ""  # why a line met there is not proven (the run's ``caveat``)
    undecided: bool = False  # untrusted because the step at that load was left out: undecided, not unknown


def _fmt_load(scenario: Scenario, x: float) -> str:
    return f"{x:.3g} req/s" if scenario.rate is not None else f"concurrency {x:g}"


def _target(scenario: Scenario) -> float:
    return scenario.rate if scenario.rate is not None else float(scenario.concurrency or 0)


def place(scenario: Scenario, points: Sequence[RunPoint], sweep: bool) -> Placement:
    target = _target(scenario)
    if not sweep:
        p = points[0]
        if p.left_out:
            return Placement(False, f"run {p.run_id} {p.left_out}: not judged")
        wanted = "open_loop" if scenario.rate is not None else "closed_loop"
        x = p.offered if p.mode == wanted else None  # one run: only the scenario's own kind of load
        if x is None:
            loop = "an open-loop rate (--rate)" if scenario.rate is not None else "a concurrency (-c)"
            return Placement(False, f"not at the scenario's load: the run was not made at {loop}")
        if x < target * (1 - 1e-9) or x > target * (1 + LOAD_TOLERANCE):
            ran, want = _fmt_load(scenario, x), _fmt_load(scenario, target)
            return Placement(False, f"not at the scenario's load: ran at {ran}, scenario at {want}")
        where = f"run {p.run_id} at {_fmt_load(scenario, x)}"
        return Placement(True, where, p.values, p.low_sample, (p.run_id,), caveat=p.caveat)
    on_axis = sorted(
        ((x, p) for p in points if not p.left_out and (x := p.axis(scenario)) is not None),
        key=lambda xp: xp[0],
    )
    above = [(x, p) for x, p in on_axis if x >= target * (1 - 1e-9)]
    cut = [
        (x, p)
        for p in points
        if p.left_out and (x := p.axis(scenario)) is not None and x >= target * (1 - 1e-9)
    ]
    if not above and cut:  # the step that would judge it is left out: its reason decides nothing
        x, p = min(cut, key=lambda xp: xp[0])
        return Placement(
            False,
            f"undecided: step {p.run_id} at {_fmt_load(scenario, x)}, the load that would judge it, is left "
            f"out ({p.left_out})",
            runs=(p.run_id,),
            undecided=True,
        )
    if not on_axis:
        kind = "open-loop steps (sweep --rate)" if scenario.rate is not None else "closed-loop steps (-c)"
        return Placement(
            False, f"not enough evidence: no valid step of the scenario's kind of load; it needs {kind}"
        )
    hi_x, _ = on_axis[-1]
    if not above:
        return Placement(
            False,
            f"the scenario's load is beyond the sweep's highest valid step ({_fmt_load(scenario, hi_x)}): "
            "measure it",
        )
    x, p = above[0]  # the next measured load at or above: it bounds the latency at the scenario's
    where = f"step {p.run_id} at {_fmt_load(scenario, x)}"
    if x > target * (1 + 1e-9):
        where += f", the next load measured above {_fmt_load(scenario, target)} (a bound: conservative)"
    return Placement(True, where, p.values, p.low_sample, (p.run_id,), caveat=p.caveat)


# --- judging ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Cell:
    line: str
    status: str  # pass | fail | undecided (meets on its estimate, not yet proven) | unknown
    value: float | None
    upper: float | None  # the 95 % interval's upper bound (latency lines)
    reason: str
    threshold_ms: float | None = None  # latency lines

    def to_dict(self) -> dict[str, Any]:
        return {"line": self.line, "status": self.status, "value": self.value, "upper": self.upper,
                "threshold_ms": self.threshold_ms, "reason": self.reason}  # fmt: skip


def _needed(pct: str) -> int:
    tail = min(int(pct[1:]), 100 - int(pct[1:])) / 100
    return round(MIN_TAIL_SAMPLES / tail)


def judge_line(line: SloLine, at: Placement) -> Cell:
    thr, pct = line.threshold_ms, line.percentile.upper()
    key = f"{line.key}.{line.percentile}"
    value, upper = at.values.get(key), at.values.get(f"{key}.hi")

    def cell(status: str, reason: str) -> Cell:
        return Cell(line.label(), status, value, upper, reason, thr)

    if not at.trusted:  # no numbers shown: they are not at the scenario's conditions
        return Cell(line.label(), _untrusted(at), None, None, at.where, thr)
    if key in at.low_sample:
        return cell("unknown", f"too few requests for {pct} (needs {_needed(line.percentile)})")
    if value is None or upper is None:
        return cell("unknown", f"no {line.metric.upper()} samples with an interval")
    if upper < thr:  # met where the run cannot show its steady state: a longer run decides
        why = at.caveat or unsettled(at.values, at.low_sample, key, line.percentile, thr)
        if why:
            later = "run" if at.caveat else "step at this rate"
            return cell(
                "undecided",
                f"upper bound {upper:.4g} ms < {thr:g} ms, but {why}: a longer {later} would decide",
            )
        return cell("pass", f"upper bound {upper:.4g} ms < {thr:g} ms")
    if value >= thr:
        return cell("fail", f"{pct} {value:.4g} ms is over the line {thr:g} ms")
    if math.isinf(upper):
        return cell(
            "undecided",
            f"{pct} {value:.4g} ms meets the line on its estimate, but too few effective requests lie "
            "beyond it to bound it from above: more requests, or a longer run, would decide",
        )
    return cell(
        "undecided",
        f"{pct} {value:.4g} ms meets the line on its estimate, but its upper bound {upper:.4g} is not "
        f"under {thr:g} ms yet: more requests would decide",
    )


def _untrusted(at: Placement) -> str:
    return "undecided" if at.undecided else "unknown"


def judge_errors(scenario: Scenario, at: Placement) -> Cell:
    label = f"errors <= {scenario.max_error_rate:.0%}"
    if not at.trusted:
        return Cell(label, _untrusted(at), None, None, at.where)
    rate = at.values.get("error_rate", 0.0)
    ok = rate <= scenario.max_error_rate
    return Cell(label, "pass" if ok else "fail", rate, None, f"{rate:.1%} errors")


def judge_attainment(scenario: Scenario, at: Placement) -> Cell | None:
    if scenario.attainment is None:
        return None
    label = f"attainment >= {scenario.attainment:.0%}"
    if not at.trusted:
        return Cell(label, _untrusted(at), None, None, at.where)
    got = at.values.get("attainment")
    if got is None:
        return Cell(label, "unknown", None, None, "no records to count requests meeting the lines")
    status = "pass" if got >= scenario.attainment else "fail"
    if status == "pass" and at.caveat:
        return Cell(label, "undecided", got, None, f"{got:.1%} of requests met every line, but {at.caveat}")
    return Cell(label, status, got, None, f"{got:.1%} of requests met every line")


@dataclass(frozen=True, slots=True)
class Verdict:
    candidate: str
    kind: str  # run | sweep
    placement: Placement
    cells: tuple[Cell, ...]
    warnings: tuple[str, ...]
    capacity_good_rps: float | None  # goodput a replica sustains while meeting every line
    caveats: tuple[str, ...] = ()  # what the candidate's evidence carries (a predicted profile's limits)

    @property
    def status(self) -> str:
        states = {c.status for c in self.cells}
        for worst in ("fail", "unknown", "undecided"):
            if worst in states:
                return worst
        return "pass"

    @property
    def margin(self) -> float | None:
        """Smallest headroom of an upper bound under its line, as a share of the line."""
        gaps = [1 - c.upper / c.threshold_ms for c in self.cells if c.upper is not None and c.threshold_ms]
        return min(gaps) if gaps else None

    def to_dict(self) -> dict[str, Any]:
        p = self.placement
        return {
            "candidate": self.candidate,
            "kind": self.kind,
            "status": self.status,
            "margin": self.margin,
            "placement": {"trusted": p.trusted, "where": p.where, "runs": list(p.runs)},
            "cells": [c.to_dict() for c in self.cells],
            "warnings": list(self.warnings),
            "caveats": list(self.caveats),
            "capacity_good_rps": self.capacity_good_rps,
            "prompt_tokens": p.values.get("prompt_tokens"),
            "output_tokens": p.values.get("output_tokens"),
            "values": dict(sorted(p.values.items())),  # what the cells were judged on (ms, shares)
        }


def _length_warnings(scenario: Scenario, at: Placement) -> list[str]:
    got, want = at.values.get("output_tokens"), scenario.output_len
    if got is not None and abs(got - want) > LENGTH_TOLERANCE * want:
        return [f"measured at ~{got:.0f} output tokens; the scenario asks for {want}"]
    return []


def _input_off(scenario: Scenario, at: Placement) -> str:
    """Why TTFT and E2E measured at another input length cannot be trusted ("" when close)."""
    got, want = at.values.get("prompt_tokens"), scenario.input_len
    if got is None or abs(got - want) <= LENGTH_TOLERANCE * want:
        return ""
    return (
        f"not at the scenario's input length: measured at ~{got:.0f} tokens, the scenario sends {want} "
        "(an input-length sweep can move it: --input-fit)"
    )


def _holds(scenario: Scenario, p: RunPoint) -> bool:
    at = Placement(True, "", p.values, p.low_sample, caveat=p.caveat)
    cells = [judge_line(line, at) for line in scenario.slos] + [judge_errors(scenario, at)]
    return all(c.status == "pass" for c in cells)


def judge(
    scenario: Scenario,
    name: str,
    points: Sequence[RunPoint],
    sweep: bool,
    adjust: Callable[[Placement], Placement] | None = None,
) -> Verdict:
    """``adjust`` moves the placed numbers (e.g. to the scenario's input length by a prefill fit)."""
    at = place(scenario, points, sweep)
    if adjust is not None:
        at = adjust(at)
    off = _input_off(scenario, at) if at.trusted else ""
    cells = [
        judge_line(line, replace(at, trusted=False, where=off))
        if off and line.metric in ("ttft", "e2e")  # latency from another prompt length: not trusted
        else judge_line(line, at)
        for line in scenario.slos
    ]
    attain = judge_attainment(scenario, at)
    cells += [c for c in (attain, judge_errors(scenario, at)) if c is not None]
    warnings = _length_warnings(scenario, at) if at.trusted else []
    if sweep:
        warnings += [f"step {p.run_id} left out: {p.left_out}" for p in points if p.left_out]
    holding = [p for p in points if not p.left_out and _holds(scenario, p) and "good_rps" in p.values]
    if holding:  # the most a replica carried while every line held
        capacity: float | None = max(p.values["good_rps"] for p in holding)
    else:
        capacity = at.values.get("good_rps") if at.trusted else None
    return Verdict(name, "sweep" if sweep else "run", at, tuple(cells), tuple(warnings), capacity)
