"""Capacity from a sweep: knees, max sustainable load, max goodput under an SLO, Little's law, replicas.

Pure: the steps' result dicts (the ``bench --out`` format) in, numbers and verdicts out.

Every figure rests on the *usable* steps only: a step with no successful request, a client that could
not keep up (NOT VALID), an interruption, no steady state (short) or a rate and latency that fail
Little's law (inconsistent) is left out of all of them, and
the analysis lists it with its reason (``loadpoint``). Each figure names the step it comes from.

- Max sustainable throughput: the highest achieved request rate (over the steady window) among usable
  steps whose error rate stays at or below ``max_error_rate`` and, for open-loop steps, that kept up
  with the offered rate.
- Max goodput under the SLO: the highest achieved request rate of a usable step where the SLO
  percentile (P95 by default) of every metric the SLO names is within its limit and errors stay low.
  In open loop the latencies are from the scheduled time (what a user arriving on schedule felt).
- An open loop's maximum (sustainable, or under the SLO) is a *lower bound*: rates are run in steps, so
  the true maximum lies between the highest rate that held and the next rate run (or above it, when
  none was); the analysis says so, with that next rate and its fate.
- A figure found at the highest load tried is a *lower bound*, not a ceiling: the SLO held at every
  higher usable step (none broke it), the knee sits on the last step, or throughput was still growing
  (closed loop: +10 % or more over the previous step; open loop: the server kept up). The plan says
  so, and its watermark and replicas are then a lower and an upper bound ("extend the sweep").
- Ceiling per replica: the lowest of the knee load, the SLO load and the max sustainable load.
  Safe watermark = ceiling x (1 - headroom); replicas for a peak = ceil(peak / watermark).
- Little's law checks each step (``little``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from tokenpace.core.analysis.capacity.drift import Drift, detect_drift, noise_floor
from tokenpace.core.analysis.capacity.knee import Knee, KneeResult, find_knee, shape_warnings
from tokenpace.core.analysis.capacity.little import LittleCheck, little_check
from tokenpace.core.analysis.capacity.loadpoint import LoadPoint, point_from_result
from tokenpace.core.analysis.capacity.slo_steps import (
    SloCapacity,
    open_loop_bound,
    slo_capacity,
    slo_warnings,
)
from tokenpace.core.analysis.evidence.runnoise import ASSUMED_CENTRE_SD

__all__ = ["LittleCheck", "LoadPoint", "analyze", "little_check", "make_plan", "point_from_result"]

DEFAULT_MAX_ERROR_RATE = 0.01
DEFAULT_HEADROOM = 0.3
PLATEAU_GAIN = 0.1  # closed loop: less throughput growth than this over the last step is a plateau


def _by_load(points: Sequence[LoadPoint]) -> list[LoadPoint]:
    return sorted(points, key=lambda p: (p.offered if p.offered is not None else 0.0, p.step))


@dataclass(frozen=True, slots=True)
class CurveAnalysis:
    points: list[LoadPoint]
    knee_ttft: KneeResult
    knee_e2e: KneeResult
    knee: Knee | None  # the lower-load of the two
    max_sustainable_rps: float | None
    max_sustainable_step: int | None
    slo: SloCapacity | None
    little: list[LittleCheck]
    max_error_rate: float
    knee_bounded: bool = True  # False: the knee is on the highest load tried
    max_sustainable_bounded: bool = True  # False: throughput still growing at the highest load tried
    left_out: dict[int, list[str]] = field(default_factory=dict)
    drift: Drift = field(default_factory=lambda: Drift(False, [], None))
    shape: list[str] = field(default_factory=list)  # warnings on the curve's shape (knee, falling latency)
    # an open loop's maximum is a lower bound: why, and the next rate run above it (None: none)
    max_sustainable_why: str = ""
    max_sustainable_at_most: float | None = None

    @property
    def inconsistent_steps(self) -> list[int]:
        return [c.step for c in self.little if c.status == "inconsistent"]

    @property
    def used_steps(self) -> list[int]:
        return [p.step for p in self.points if p.usable]

    def to_dict(self) -> dict[str, Any]:
        knee = self.knee.to_dict() if self.knee else None
        if knee is not None:
            knee.update(step=self.knee.index + 1, at_highest_load=not self.knee_bounded)  # type: ignore[union-attr]
        return {
            "used_steps": self.used_steps,
            "left_out_steps": [{"step": s, "reasons": r} for s, r in self.left_out.items()],
            "knee": knee,
            "knee_ttft_p95": self.knee_ttft.to_dict(),
            "knee_e2e_p95": self.knee_e2e.to_dict(),
            "max_sustainable": {
                "load_rps": self.max_sustainable_rps,
                "step": self.max_sustainable_step,
                "max_error_rate": self.max_error_rate,
                "lower_bound": not self.max_sustainable_bounded or bool(self.max_sustainable_why),
                "extend_the_sweep": not self.max_sustainable_bounded,
                "lower_bound_why": self.max_sustainable_why or None,
                "true_max_below_rps": self.max_sustainable_at_most,
            },
            "slo_capacity": self.slo.to_dict() if self.slo else None,
            "drift": self.drift.to_dict(),
            "shape_warnings": self.shape,
            "littles_law": {
                "checked_steps": [c.step for c in self.little if c.status != "skipped"],
                "consistent": not self.inconsistent_steps,
                "inconsistent_steps": self.inconsistent_steps,
                "steps": [c.to_dict() for c in self.little],
            },
        }


def _sustainable_bounded(best: LoadPoint, usable: list[LoadPoint]) -> bool:
    """Whether a higher load was tried and gave no more: otherwise the maximum lies above it."""
    ordered = _by_load(usable)
    if ordered[-1] is not best:
        return True  # a higher load was tried and did not do better
    if best.mode != "closed_loop" or len(ordered) < 2:
        return False  # open loop: the server kept up with the highest rate tried
    prev = ordered[-2].achieved_rps
    return prev > 0 and best.achieved_rps < prev * (1 + PLATEAU_GAIN)


def _saturated_above(best: LoadPoint, pts: list[LoadPoint], overloaded: set[int]) -> bool:
    """An open-loop step at a higher rate where the queue grew: the server cannot carry that rate,
    even when the step is left out as short (its drain is long *because* it was saturated)."""
    return any(
        p.step in overloaded and p.mode == best.mode and p.valid and not p.interrupted
        and (p.offered or 0.0) > (best.offered or 0.0)
        for p in pts
    )  # fmt: skip


def _probe_bounded(usable: list[LoadPoint], plateau_rps: float | None) -> bool:
    """An open-loop curve that reached (90 % of) the rate where a closed-loop probe levelled off."""
    top = _by_load(usable)[-1] if usable else None
    return bool(plateau_rps and top and top.mode == "open_loop" and (top.offered or 0) >= 0.9 * plateau_rps)


def analyze(
    points: Sequence[LoadPoint],
    slo: dict[str, float] | None = None,
    slo_percentile: str = "p95",
    max_error_rate: float = DEFAULT_MAX_ERROR_RATE,
    plateau_rps: float | None = None,
    revisit: LoadPoint | None = None,
    run_noise_sd: float = ASSUMED_CENTRE_SD,
    off_curve: Sequence[tuple[str, dict[str, Any] | None]] = (),
) -> CurveAnalysis:
    """``plateau_rps``: the throughput where a closed-loop probe levelled off (sweep --auto); open-loop
    steps placed up to it reach a maximum the probe already found. ``revisit``: the first step run
    again after the last (drift). When latency moved with time there is no knee. ``run_noise_sd``: the
    run-to-run SD of a P50 on this host (``evidence.runnoise``): drift and a rising open-loop trend are
    declared only beyond what it explains. ``off_curve``: (name, time_trend) of the steps run off the
    curve (probes, short attempts), whose trends the drift report names too."""
    little = [little_check(p, floor=noise_floor(run_noise_sd)) for p in points]
    pts = [
        replace(p, inconsistent=c.note) if c.status == "inconsistent" else p
        for p, c in zip(points, little, strict=True)
    ]
    usable = [p for p in pts if p.usable]
    loads = [p.achieved_rps if p.usable else None for p in pts]
    drift = detect_drift(pts, revisit, run_noise_sd, off_curve)
    knee_t = find_knee(loads, [p.pct("ttft_ms", "p95") for p in pts], "TTFT P95")
    knee_e = find_knee(loads, [p.pct("e2e_ms", "p95") for p in pts], "E2E P95")
    if drift.moved:
        moved = KneeResult(None, "no knee: latency moved with time, not only with load (see drift)")
        knee_t = knee_e = moved
    knees = [k for k in (knee_t.knee, knee_e.knee) if k is not None]
    knee = min(knees, key=lambda k: k.load) if knees else None
    knee_bounded = knee is None or pts[knee.index] is not _by_load(usable)[-1]
    overloaded = {c.step for c in little if c.status == "overloaded"}
    sustainable = [p for p in usable if p.error_rate <= max_error_rate and p.step not in overloaded]
    best = max(sustainable, key=lambda p: p.achieved_rps, default=None)
    fates = {
        p.step: "overloaded" if p.step in overloaded else f"errors {p.error_rate:.1%}"
        for p in usable
        if p not in sustainable
    }
    fates.update({p.step: f"left out: {', '.join(p.left_out_reasons)}" for p in pts if not p.usable})
    why, at_most = open_loop_bound(best, pts, fates, {})
    return CurveAnalysis(
        pts,
        knee_t,
        knee_e,
        knee,
        best.achieved_rps if best else None,
        best.step if best else None,
        slo_capacity(pts, slo, slo_percentile, max_error_rate) if slo else None,
        little,
        max_error_rate,
        knee_bounded=knee_bounded,
        max_sustainable_bounded=best is None
        or _sustainable_bounded(best, usable)
        or _probe_bounded(usable, plateau_rps)
        or _saturated_above(best, pts, overloaded),
        left_out={p.step: p.left_out_reasons for p in pts if not p.usable},
        drift=drift,
        shape=_shape(usable, knee.index if knee else None, pts),
        max_sustainable_why=why,
        max_sustainable_at_most=at_most,
    )


def _shape(usable: list[LoadPoint], knee_index: int | None, pts: list[LoadPoint]) -> list[str]:
    def p50(p: LoadPoint) -> tuple[float, float, float] | None:
        value, ci = p.slo_pct("ttft_ms", "p50"), p.slo_ci("ttft_ms", "p50")
        return (value, ci[0], ci[1]) if value is not None and ci is not None else None

    loads = [p.offered if p.offered is not None else p.achieved_rps for p in usable]
    at = usable.index(pts[knee_index]) if knee_index is not None else None
    return shape_warnings([p.step for p in usable], loads, [p50(p) for p in usable], at)


# --- the plan ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Plan:
    ceiling_rps: float | None
    ceiling_from: str  # knee | slo | max_sustainable | none
    headroom: float
    watermark_rps: float | None
    watermark_in_flight: float | None  # Little: watermark x mean E2E near that load
    peak_rps: float | None
    replicas: int | None
    warnings: list[str]
    ceiling_step: int | None = None
    ceiling_is_lower_bound: bool = False  # then the watermark is a lower bound, replicas an upper one
    used_steps: list[int] = field(default_factory=list)
    left_out_steps: list[int] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "ceiling_rps_per_replica": self.ceiling_rps,
            "ceiling_from": self.ceiling_from,
            "ceiling_step": self.ceiling_step,
            "ceiling_is_lower_bound": self.ceiling_is_lower_bound,
            "headroom": self.headroom,
            "watermark_rps_per_replica": self.watermark_rps,
            "watermark_in_flight_per_replica": self.watermark_in_flight,
            "peak_rps": self.peak_rps,
            "replicas": self.replicas,
            "replicas_is_upper_bound": self.ceiling_is_lower_bound and self.replicas is not None,
            "rests_on_steps": self.used_steps,
            "left_out_steps": self.left_out_steps,
            "warnings": self.warnings,
        }


@dataclass(frozen=True, slots=True)
class _Candidate:
    load: float
    source: str
    step: int | None
    bounded: bool


def _candidates(a: CurveAnalysis, warnings: list[str]) -> list[_Candidate]:
    out: list[_Candidate] = []
    if a.knee is not None:
        step = a.knee.index + 1
        out.append(_Candidate(a.knee.load, "knee", step, a.knee_bounded))
        if not a.knee_bounded:
            warnings.append(
                f"the knee is on the highest load tried (step {step}): the curve may bend further on; "
                "extend the sweep"
            )
    else:
        warnings.append(f"{a.knee_ttft.reason}; the ceiling is not a knee")
    if a.slo is not None:
        if a.slo.load_rps is None:
            warnings.append(f"the SLO ({a.slo.percentile}) held at no usable step: no load meets it")
            out.append(_Candidate(0.0, "slo", None, True))
        else:
            out.append(_Candidate(a.slo.load_rps, "slo", a.slo.step, a.slo.bounded))
            if not a.slo.bounded and not a.slo.undecided_above:
                warnings.append(
                    f"SLO held up to the highest load tried ({a.slo.load_rps:.3g} req/s, step "
                    f"{a.slo.step}); the ceiling is above it: extend the sweep"
                )
        warnings += slo_warnings(a.slo)
    if a.max_sustainable_rps is not None:
        top, bounded = a.max_sustainable_step, a.max_sustainable_bounded
        out.append(_Candidate(a.max_sustainable_rps, "max_sustainable", top, bounded))
        if not a.max_sustainable_bounded:
            warnings.append(
                f"throughput had not levelled off at the highest load tried ({a.max_sustainable_rps:.3g} "
                f"req/s, step {a.max_sustainable_step}): the maximum is above it; extend the sweep"
            )
    return out


def make_plan(a: CurveAnalysis, peak_rps: float | None = None, headroom: float = DEFAULT_HEADROOM) -> Plan:
    if not 0 <= headroom < 1:
        raise ValueError("headroom must be at least 0% and below 100%")
    if peak_rps is not None and peak_rps <= 0:
        raise ValueError("the peak rate must be positive")
    warnings: list[str] = []
    if a.left_out:
        shown = "; ".join(f"step {s}: {', '.join(r)}" for s, r in a.left_out.items())
        warnings.append(f"left out of every figure below ({shown})")
    used, left = a.used_steps, list(a.left_out)
    if not used:
        warnings.append("no usable step: nothing to plan on")
        return Plan(None, "none", headroom, None, None, peak_rps, None, warnings, None, False, used, left)
    if a.drift.moved:  # the curve mixes time with load: no ceiling read from it is a capacity
        warnings += [f"latency moved with time: {r}" for r in a.drift.reasons]
        warnings.append(
            "no knee, ceiling or replica count from this sweep: latency moved with time, not only "
            "with load; rerun it when the server is steady, with the revisit on (sweep --revisit)"
        )
        return Plan(None, "none", headroom, None, None, peak_rps, None, warnings, None, False, used, left)
    warnings += a.shape
    candidates = _candidates(a, warnings)
    if a.inconsistent_steps:
        steps = ", ".join(str(s) for s in a.inconsistent_steps)
        warnings.append(f"Little's law fails at step(s) {steps}: the sweep is inconsistent, check them")
    if not candidates:
        steps = ", ".join(map(str, used))
        warnings.append(f"no ceiling: no knee, SLO load or sustainable load at the usable step(s) {steps}")
        return Plan(None, "none", headroom, None, None, peak_rps, None, warnings, None, False, used, left)
    # the lowest load wins; at equal loads a proven ceiling beats a lower bound
    best = min(candidates, key=lambda c: (c.load, not c.bounded))
    watermark = best.load * (1 - headroom)
    in_flight = _in_flight_at([p for p in a.points if p.usable], watermark)
    replicas = None
    if peak_rps is not None:
        replicas = math.ceil(peak_rps / watermark) if watermark > 0 else None
        if replicas is None:
            warnings.append("watermark is zero: no replica count can carry the peak")
    if not best.bounded:
        warnings.append(
            f"the ceiling ({best.source.replace('_', ' ')}, {best.load:.3g} req/s) is a lower bound: the "
            "watermark is at least what is shown and the replicas at most"
        )
    return Plan(
        best.load,
        best.source,
        headroom,
        watermark,
        in_flight,
        peak_rps,
        replicas,
        warnings,
        best.step,
        not best.bounded,
        used,
        left,
    )


def _in_flight_at(points: Sequence[LoadPoint], load: float) -> float | None:
    """Little's law at the watermark: load x mean E2E (of the requests each step's rate rests on)
    interpolated between the steps around it."""
    pairs = sorted(
        (p.achieved_rps, w / 1000)
        for p in points
        if p.ok and (w := p.steady_latency_ms or p.pct("e2e_ms", "mean")) is not None
    )
    if not pairs or load <= 0:
        return None
    xs = [x for x, _ in pairs]
    ws = [w for _, w in pairs]
    if load <= xs[0]:
        w = ws[0]
    elif load >= xs[-1]:
        w = ws[-1]
    else:
        j = next(i for i, x in enumerate(xs) if x >= load)
        x0, x1, w0, w1 = xs[j - 1], xs[j], ws[j - 1], ws[j]
        w = w0 + (w1 - w0) * (load - x0) / (x1 - x0) if x1 > x0 else w1
    return load * w
