"""A sweep's capacity: the analysis and plan of its curve steps (``core.analysis.capacity``), with
the figures' intervals from resampling each step's records when the records are at hand (the sweep
just run, or the files beside a sweep read back by ``plan``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tokenpace.core.analysis.capacity.plan import (
    DEFAULT_HEADROOM,
    DEFAULT_MAX_ERROR_RATE,
    analyze,
    make_plan,
    point_from_result,
)
from tokenpace.core.analysis.capacity.resample import DEFAULT_RESAMPLES, capacity_intervals, step_sample
from tokenpace.core.analysis.capacity.scale_signal import scale_signal
from tokenpace.core.record import RequestRecord

INTERVAL_SEED = 0  # the resamples are repeatable: the same sweep gives the same intervals


def capacity(
    steps: list[dict[str, Any]],
    slo: dict[str, float] | None,
    slo_percentile: str = "p95",
    max_error_rate: float = DEFAULT_MAX_ERROR_RATE,
    peak_rps: float | None = None,
    headroom: float = DEFAULT_HEADROOM,
    plateau_rps: float | None = None,
    revisit: dict[str, Any] | None = None,
    records: Sequence[Sequence[RequestRecord]] | None = None,
    resamples: int = DEFAULT_RESAMPLES,
    caveats: Sequence[str] = (),
    off_curve: Sequence[dict[str, Any]] = (),
) -> dict[str, Any]:
    """Analysis and plan of curve steps in the ``bench --out`` format (used by sweep and plan);
    ``plateau_rps``: where an --auto probe's throughput levelled off, if it did; ``revisit``: the
    first step run again after the last, if it was; ``records``: each curve step's records (empty
    for a step without them), for the intervals and the leave-one-out of steps; ``caveats``: what
    every figure carries (a predicted sweep's profile limits), kept in the plan; ``off_curve``: the
    steps run off the curve (probes, short attempts), whose latency trends the drift report names."""
    points = [point_from_result(i + 1, d) for i, d in enumerate(steps)]
    again = point_from_result(len(steps) + 1, revisit) if revisit else None
    named = [(_off_curve_name(d), d.get("time_trend")) for d in off_curve]
    analysis = analyze(
        points, slo or None, slo_percentile, max_error_rate, plateau_rps, again, off_curve=named
    )
    plan = make_plan(analysis, peak_rps, headroom)
    plan_doc = {**plan.to_dict(), "caveats": list(caveats)}
    by_load = sorted((p for p in analysis.points if p.usable), key=lambda p: (p.offered or 0.0, p.step))
    knee_step = analysis.knee.index + 1 if analysis.knee else None
    signal = scale_signal(steps, [p.step for p in by_load], knee_step)  # GPU utilisation, queue, knee
    if signal is not None:
        plan_doc["scale_out"] = signal
    if records is not None and len(records) == len(steps) and not analysis.drift.moved:
        samples = [
            step_sample(p, recs, (d.get("summary") or {}).get("steady") or {}) if recs else None
            for p, d, recs in zip(analysis.points, steps, records, strict=True)
        ]
        options: dict[str, Any] = {
            "slo": slo or None,
            "slo_percentile": slo_percentile,
            "max_error_rate": max_error_rate,
            "plateau_rps": plateau_rps,
            "revisit": again,
            "peak_rps": peak_rps,
            "headroom": headroom,
        }
        iv = capacity_intervals(analysis, plan, samples, options, resamples, INTERVAL_SEED)
        plan_doc["intervals"] = iv.to_dict()
        plan_doc["warnings"] = [*plan_doc["warnings"], *iv.left_out_moves]
    return {"analysis": analysis.to_dict(), "plan": plan_doc}


def _off_curve_name(step: dict[str, Any]) -> str:
    info = step.get("sweep_step") or {}
    what = "short attempt" if info.get("superseded_as_short") else str(info.get("phase") or "step")
    return f"{what} (run {info.get('index', '?')})"
