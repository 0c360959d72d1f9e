"""Intervals for the knee, the ceiling, the watermark and the replica count, and the steps that move
the knee. Pure: the analysed steps and their records in, intervals and notes out.

The knee (Kneedle on P95s) and the plan read from it are point estimates; the same sweep measured
again would put them elsewhere. Two checks say by how much:

- *Bootstrap of each step's records* (``resamples`` times, seeded; each step's successful requests
  drawn with replacement, at most ``MAX_RECORDS`` of them, evenly thinned, in circular blocks of
  send time as long as the step's requests moved together, ``evidence.dependence``): each step's TTFT and E2E
  P95 and P50, its mean E2E and its steady rate are recomputed (closed loop: the rate is the measured
  mean in flight over the mean E2E of the requests drawn from the steady basis; open loop: the rate
  draws the Poisson noise of its completion count), and the analysis and plan are run again. The
  95 % interval of each figure is the 2.5th and 97.5th percentile over the resamples; the knee's step
  is given with the share of resamples that put the knee there. Drift and Little's checks are kept
  as measured (a resample does not re-run them), the SLO verdicts use the intervals stored per step.
- *Leave-one-out of steps*: each usable step is left out in turn and the analysis run again; a step
  whose absence moves the knee to another step, or changes the replica count, is named.

What it cannot tell: a sweep run again on another day differs by more than its requests' noise
(``evidence.runnoise``); these intervals are the sampling part only.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from tokenpace.core.analysis.capacity.loadpoint import LoadPoint
from tokenpace.core.analysis.capacity.plan import CurveAnalysis, Plan, analyze, make_plan
from tokenpace.core.analysis.evidence.dependence import block_draws, block_length
from tokenpace.core.metrics import e2e_ns, ttft_ns
from tokenpace.core.record import RequestRecord, Status
from tokenpace.core.stats import design_effects

DEFAULT_RESAMPLES = 200
MAX_RESAMPLES = 2000
MAX_RECORDS = 5000  # per step: a larger step is thinned evenly (bounds each resample's work)
NS_PER_MS = 1e6


@dataclass(frozen=True, slots=True)
class _StepSample:
    """What a resample redraws from one step."""

    ttft: np.ndarray  # ms, successful requests
    e2e: np.ndarray  # ms
    basis_e2e: np.ndarray  # ms, the requests the steady rate rests on (closed loop)
    in_flight: float | None  # measured mean in flight over the steady window (closed loop)
    completions: int  # completions the open-loop rate counted
    block: int = 1  # requests per resampled block (in send order)


def _thin(values: list[float]) -> np.ndarray:
    a = np.asarray(values, dtype=np.float64)
    if len(a) > MAX_RECORDS:
        a = a[np.linspace(0, len(a) - 1, MAX_RECORDS).astype(int)]
    return a


def step_sample(p: LoadPoint, records: Sequence[RequestRecord], steady: dict[str, Any]) -> _StepSample | None:
    """The arrays a resample draws from; None when the step has no successful request to draw."""
    ok = [r for r in records if not r.warmup and r.status is Status.OK and r.end_ns is not None]
    ok.sort(key=lambda r: r.sent_ns)  # in send order: neighbours that moved together are drawn together
    ttft = [v / NS_PER_MS for r in ok if (v := ttft_ns(r)) is not None]
    e2e = [v / NS_PER_MS for r in ok if (v := e2e_ns(r)) is not None]
    if not ttft or not e2e:
        return None
    basis = e2e
    window, ramp = steady.get("window_s"), steady.get("excluded_ramp_up_s")
    if p.mode == "closed_loop" and isinstance(window, (int, float)) and isinstance(ramp, (int, float)):
        start = min(r.sent_ns for r in ok) + ramp * 1e9
        end = start + window * 1e9
        basis = [(r.end_ns - r.sent_ns) / NS_PER_MS for r in ok if r.sent_ns <= end and r.end_ns > start]  # type: ignore[operator]
    in_flight = p.achieved_rps * float(np.mean(basis)) / 1000 if basis else None
    completions = int(steady.get("completions") or len(ok))
    t, e = _thin(ttft), _thin(e2e)
    block = block_length([*design_effects(t, [50, 95]), *design_effects(e, [50, 95])], min(len(t), len(e)))
    return _StepSample(t, e, _thin(basis or e2e), in_flight, completions, block)


def _draw(values: np.ndarray, block: int, rng: np.random.Generator) -> np.ndarray:
    drawn: np.ndarray = values[block_draws(len(values), block, 1, rng)[0]]
    return drawn


def _redrawn(p: LoadPoint, s: _StepSample, rng: np.random.Generator) -> LoadPoint:
    ttft = _draw(s.ttft, s.block, rng)
    e2e = _draw(s.e2e, s.block, rng)
    w_ms = float(np.mean(_draw(s.basis_e2e, s.block, rng)))
    if p.mode == "closed_loop" and s.in_flight:
        rps = s.in_flight / (w_ms / 1000)
    else:
        rps = p.achieved_rps * rng.poisson(max(s.completions, 1)) / max(s.completions, 1)
    latency = {k: dict(v) for k, v in p.latency.items()}
    for metric, values in (("ttft_ms", ttft), ("e2e_ms", e2e)):
        p50, p95 = np.percentile(values, [50, 95])
        latency.setdefault(metric, {}).update(p50=float(p50), p95=float(p95), mean=float(np.mean(values)))
    slo_latency = latency if p.slo_basis == "send" else p.slo_latency
    steady_w = w_ms if p.steady_latency_ms is not None else None
    return replace(p, achieved_rps=rps, latency=latency, slo_latency=slo_latency, steady_latency_ms=steady_w)


def _interval(values: list[float]) -> tuple[float, float] | None:
    if not values:
        return None
    lo, hi = np.percentile(np.asarray(values), [2.5, 97.5])
    return float(lo), float(hi)


@dataclass(frozen=True, slots=True)
class Figures:
    """One run of the analysis and plan: what the intervals are made of."""

    knee_step: int | None
    knee_load: float | None
    ceiling: float | None
    watermark: float | None
    replicas: int | None


@dataclass(frozen=True, slots=True)
class Intervals:
    resamples: int
    seed: int
    knee_load: tuple[float, float] | None
    knee_steps: dict[int, float]  # step -> share of resamples with the knee there
    no_knee_share: float
    ceiling: tuple[float, float] | None
    watermark: tuple[float, float] | None
    replicas: tuple[int, int] | None
    left_out_moves: list[str] = field(default_factory=list)  # leave-one-out: steps that move a figure
    steps_resampled: list[int] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "method": "bootstrap of each step's records; leave-one-out of steps",
            "resamples": self.resamples,
            "seed": self.seed,
            "steps_resampled": self.steps_resampled,
            "knee_load_rps_95": list(self.knee_load) if self.knee_load else None,
            "knee_step_shares": {str(k): v for k, v in self.knee_steps.items()},
            "no_knee_share": self.no_knee_share,
            "ceiling_rps_95": list(self.ceiling) if self.ceiling else None,
            "watermark_rps_95": list(self.watermark) if self.watermark else None,
            "replicas_95": list(self.replicas) if self.replicas else None,
            "left_out_moves": self.left_out_moves,
        }


Run = Callable[[list[LoadPoint]], Figures]  # the analysis and plan of a set of steps


def bootstrap(
    points: Sequence[LoadPoint],
    samples: Sequence[_StepSample | None],
    run: Run,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> Intervals:
    """``samples[i]``: the records of ``points[i]`` (``step_sample``), None to keep the step as is."""
    if not 1 <= resamples <= MAX_RESAMPLES:
        raise ValueError(f"resamples must be 1 to {MAX_RESAMPLES}")
    drawn = [p.step for p, s in zip(points, samples, strict=True) if s is not None and p.usable]
    if not drawn:  # no records to draw from: no interval (a degenerate one would claim certainty)
        return Intervals(0, seed, None, {}, 0.0, None, None, None)
    rng = np.random.default_rng(seed)
    figs = []
    for _ in range(resamples):
        pts = [
            _redrawn(p, s, rng) if s is not None and p.usable else p
            for p, s in zip(points, samples, strict=True)
        ]
        figs.append(run(pts))
    counts: dict[int, int] = {}
    for f in figs:
        if f.knee_step is not None:
            counts[f.knee_step] = counts.get(f.knee_step, 0) + 1
    steps = {k: counts[k] / resamples for k in sorted(counts)}
    reps = [f.replicas for f in figs if f.replicas is not None]
    rep_ci = _interval([float(r) for r in reps])
    return Intervals(
        resamples,
        seed,
        _interval([f.knee_load for f in figs if f.knee_load is not None]),
        steps,
        sum(f.knee_step is None for f in figs) / resamples,
        _interval([f.ceiling for f in figs if f.ceiling is not None]),
        _interval([f.watermark for f in figs if f.watermark is not None]),
        (math.floor(rep_ci[0]), math.ceil(rep_ci[1])) if rep_ci else None,
        steps_resampled=drawn,
    )


def leave_one_out(points: Sequence[LoadPoint], run: Run, full: Figures) -> list[str]:
    """Each usable step left out in turn: the steps whose absence moves the knee or the replicas."""
    notes = []
    for i, p in enumerate(points):
        if not p.usable:
            continue
        pts = list(points)
        pts[i] = replace(p, inconsistent="left out to see whether the knee moves")
        f = run(pts)
        moved = []
        if f.knee_step != full.knee_step:
            was = f"step {full.knee_step}" if full.knee_step else "no knee"
            now = (
                f"step {f.knee_step} ({f.knee_load:.3g} req/s)" if f.knee_step and f.knee_load else "no knee"
            )
            moved.append(f"the knee from {was} to {now}")
        if f.replicas != full.replicas and full.replicas is not None:
            moved.append(f"the replicas from {full.replicas} to {f.replicas if f.replicas else 'none'}")
        if moved:
            notes.append(f"leaving out step {p.step} moves {' and '.join(moved)}")
    return notes


def figures(a: CurveAnalysis, plan: Plan) -> Figures:
    knee = a.knee
    return Figures(
        a.points[knee.index].step if knee else None,
        knee.load if knee else None,
        plan.ceiling_rps,
        plan.watermark_rps,
        plan.replicas,
    )


def capacity_intervals(
    a: CurveAnalysis,
    plan: Plan,
    samples: Sequence[_StepSample | None],
    options: dict[str, Any],
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> Intervals:
    """The bootstrap and the leave-one-out of the analysed steps ``a.points``; ``options``: what
    ``analyze`` was given beyond the points (slo, percentile, error rate, plateau, revisit, noise)
    and ``make_plan``'s ``peak_rps`` and ``headroom``."""
    plan_kw = {k: options[k] for k in ("peak_rps", "headroom") if k in options}
    analyze_kw = {k: v for k, v in options.items() if k not in plan_kw}

    def run(pts: list[LoadPoint]) -> Figures:
        again = analyze(pts, **analyze_kw)
        return figures(again, make_plan(again, **plan_kw))

    boot = bootstrap(a.points, samples, run, resamples, seed)
    return replace(boot, left_out_moves=leave_one_out(a.points, run, figures(a, plan)))
