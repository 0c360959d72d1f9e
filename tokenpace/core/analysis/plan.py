"""Capacity from a sweep: knees, max sustainable load, max goodput under an SLO, Little's law, replicas.

Pure: the steps' result dicts (the ``bench --out`` format) in, numbers and verdicts out.

- Max sustainable throughput: the highest achieved request rate among steps whose error rate stays
  at or below ``max_error_rate`` and, for open-loop steps, that kept up with the offered rate.
- Max goodput under the SLO: the highest achieved request rate of a step where the SLO percentile
  (P95 by default) of every metric the SLO names is within its limit and errors stay low.
- Ceiling per replica: the lowest of the knee load, the SLO load and the max sustainable load.
  Safe watermark = ceiling x (1 - headroom); replicas for a peak = ceil(peak / watermark).
- Little's law (L = X x W: requests in flight = completion rate x mean latency) checks each step.
  Closed loop: C users sharing n requests keep n / ceil(n / C) in flight on average (C in a long
  step, less when ramp-up and drain are a large part of a short one); a step far below that was not
  run at the load it claims (client lag, a connection cap, too short a step); a step above it has a
  wrong rate or latency. Open loop: the step should complete ok / (sent / rate + W) requests per
  second; far fewer means the server fell behind (overloaded: queue growing, no steady state), more
  means the numbers are wrong. Tolerance: max(20 %, 3 / sqrt(n)), the Poisson noise of n requests.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tokenpace.core.analysis.knee import Knee, KneeResult, find_knee

DEFAULT_MAX_ERROR_RATE = 0.01
DEFAULT_HEADROOM = 0.3
LITTLE_MIN_TOLERANCE = 0.2
SLO_METRICS = ("ttft_ms", "tpot_ms", "e2e_ms")


@dataclass(frozen=True, slots=True)
class LoadPoint:
    """One sweep step, reduced to what capacity analysis needs (latencies in ms)."""

    step: int  # 1-based
    mode: str  # closed_loop | open_loop
    offered: float | None  # concurrency (closed loop) or requests/s (open loop)
    max_concurrency: int | None
    achieved_rps: float  # ok requests per second of window
    sent: int
    ok: int
    error_rate: float
    window_s: float
    goodput: float | None
    valid: bool
    latency: dict[str, dict[str, float | None]] = field(default_factory=dict)  # metric -> p50/p95/...

    def pct(self, metric: str, p: str) -> float | None:
        return (self.latency.get(metric) or {}).get(p)


def point_from_result(step: int, result: dict[str, Any]) -> LoadPoint:
    load = result["conditions"]["load"]
    s = result["summary"]
    closed = load["mode"] == "closed_loop"
    counts = s.get("counts") or {}
    lat = {
        m: {k: (s.get(m) or {}).get(k) for k in ("mean", "p50", "p90", "p95", "p99")}
        for m in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms")
    }
    return LoadPoint(
        step=step,
        mode=load["mode"],
        offered=load["concurrency"] if closed else load["rate"],
        max_concurrency=load.get("max_concurrency"),
        achieved_rps=float(s.get("request_throughput") or 0.0),
        sent=int(counts.get("sent", 0)),
        ok=int(counts.get("ok", 0)),
        error_rate=float(s.get("error_rate") or 0.0),
        window_s=float(s.get("window_s") or 0.0),
        goodput=s.get("goodput"),
        valid=bool(result.get("valid", True)),
        latency=lat,
    )


# --- Little's law ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LittleCheck:
    step: int
    status: str  # ok | inconsistent | overloaded | skipped
    in_flight: float | None  # L = X * W
    expected: float | None  # what the step's load implies (in flight, or completions/s for open loop)
    ratio: float | None  # measured / expected
    note: str = ""

    def to_dict(self) -> dict:
        return {
            "step": self.step,
            "status": self.status,
            "in_flight": self.in_flight,
            "expected": self.expected,
            "ratio": self.ratio,
            "note": self.note,
        }


def little_check(p: LoadPoint, max_error_rate: float = 0.05) -> LittleCheck:
    w_ms = p.pct("e2e_ms", "mean")
    if not p.ok or w_ms is None or p.window_s <= 0:
        return LittleCheck(p.step, "skipped", None, None, None, "no successful requests")
    if p.error_rate > max_error_rate:
        return LittleCheck(
            p.step, "skipped", None, None, None, f"{p.error_rate:.0%} errors: failed requests hold slots too"
        )
    w = w_ms / 1000
    in_flight = p.achieved_rps * w
    tol = max(LITTLE_MIN_TOLERANCE, 3 / math.sqrt(p.ok))
    if p.mode == "closed_loop":
        c = int(p.offered or 1)
        expected = p.sent / math.ceil(p.sent / c) if p.sent else float(c)
        ratio = in_flight / expected
        if ratio < 1 - tol:
            note = (
                f"{in_flight:.1f} requests in flight on average, {expected:.1f} expected at concurrency {c}: "
                "client lag, a connection cap or ramp-up/drain; this step ran below its stated load"
            )
            return LittleCheck(p.step, "inconsistent", in_flight, expected, ratio, note)
        if ratio > 1 + tol:
            note = f"{in_flight:.1f} in flight exceeds concurrency {c}: the step's rate or latency is wrong"
            return LittleCheck(p.step, "inconsistent", in_flight, expected, ratio, note)
        return LittleCheck(p.step, "ok", in_flight, expected, ratio)
    rate = float(p.offered or 0.0)
    expected_rps = p.ok / (p.sent / rate + w) if rate > 0 and p.sent else 0.0
    rps_ratio = p.achieved_rps / expected_rps if expected_rps else None
    if rps_ratio is None:
        return LittleCheck(p.step, "skipped", in_flight, None, None, "no offered rate")
    if p.max_concurrency and in_flight > p.max_concurrency * (1 + tol):
        note = f"{in_flight:.1f} in flight exceeds the cap of {p.max_concurrency}: rate or latency is wrong"
        return LittleCheck(p.step, "inconsistent", in_flight, expected_rps, rps_ratio, note)
    if rps_ratio < 1 - tol:
        note = (
            f"completed {p.achieved_rps:.3g} req/s where {expected_rps:.3g} were due: "
            "the server fell behind the offered rate (queue growing, beyond capacity)"
        )
        return LittleCheck(p.step, "overloaded", in_flight, expected_rps, rps_ratio, note)
    if rps_ratio > 1 + tol:
        note = f"completed {p.achieved_rps:.3g} req/s, more than {expected_rps:.3g} due: numbers are wrong"
        return LittleCheck(p.step, "inconsistent", in_flight, expected_rps, rps_ratio, note)
    return LittleCheck(p.step, "ok", in_flight, expected_rps, rps_ratio)


# --- the curve --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SloCapacity:
    slo: dict[str, float]
    percentile: str
    holds: list[bool]  # per step
    step: int | None  # the highest-load step where it holds
    load_rps: float | None
    goodput_rps: float | None  # requests/s that met the SLO at that step

    def to_dict(self) -> dict:
        return {
            "slo": self.slo,
            "percentile": self.percentile,
            "holds": self.holds,
            "step": self.step,
            "max_load_rps": self.load_rps,
            "goodput_rps": self.goodput_rps,
        }


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

    @property
    def inconsistent_steps(self) -> list[int]:
        return [c.step for c in self.little if c.status == "inconsistent"]

    def to_dict(self) -> dict:
        return {
            "knee": self.knee.to_dict() if self.knee else None,
            "knee_ttft_p95": self.knee_ttft.to_dict(),
            "knee_e2e_p95": self.knee_e2e.to_dict(),
            "max_sustainable": {
                "load_rps": self.max_sustainable_rps,
                "step": self.max_sustainable_step,
                "max_error_rate": self.max_error_rate,
            },
            "slo_capacity": self.slo.to_dict() if self.slo else None,
            "littles_law": {
                "consistent": not self.inconsistent_steps,
                "inconsistent_steps": self.inconsistent_steps,
                "steps": [c.to_dict() for c in self.little],
            },
        }


def slo_holds(p: LoadPoint, slo: dict[str, float], percentile: str, max_error_rate: float) -> bool:
    if not p.ok or p.error_rate > max_error_rate:
        return False
    for metric in SLO_METRICS:
        limit = slo.get(metric)
        if limit is None:
            continue
        value = p.pct(metric, percentile)
        if value is None:
            if metric == "tpot_ms":
                continue  # single-token outputs have no TPOT; they meet a TPOT SLO (see metrics)
            return False
        if value > limit:
            return False
    return True


def analyze(
    points: Sequence[LoadPoint],
    slo: dict[str, float] | None = None,
    slo_percentile: str = "p95",
    max_error_rate: float = DEFAULT_MAX_ERROR_RATE,
) -> CurveAnalysis:
    pts = list(points)
    usable = [p.ok > 0 and p.valid for p in pts]
    loads = [p.achieved_rps if u else None for p, u in zip(pts, usable, strict=True)]
    knee_t = find_knee(loads, [p.pct("ttft_ms", "p95") for p in pts], "TTFT P95")
    knee_e = find_knee(loads, [p.pct("e2e_ms", "p95") for p in pts], "E2E P95")
    knees = [k for k in (knee_t.knee, knee_e.knee) if k is not None]
    knee = min(knees, key=lambda k: k.load) if knees else None
    little = [little_check(p) for p in pts]
    overloaded = {c.step for c in little if c.status == "overloaded"}
    sustainable = [p for p in pts if p.ok and p.error_rate <= max_error_rate and p.step not in overloaded]
    best = max(sustainable, key=lambda p: p.achieved_rps, default=None)
    slo_cap = None
    if slo:
        holds = [slo_holds(p, slo, slo_percentile, max_error_rate) for p in pts]
        ok_pts = [p for p, h in zip(pts, holds, strict=True) if h]
        top = max(ok_pts, key=lambda p: p.achieved_rps, default=None)
        slo_cap = SloCapacity(
            dict(slo),
            slo_percentile,
            holds,
            top.step if top else None,
            top.achieved_rps if top else None,
            top.goodput if top else None,
        )
    return CurveAnalysis(
        pts,
        knee_t,
        knee_e,
        knee,
        best.achieved_rps if best else None,
        best.step if best else None,
        slo_cap,
        little,
        max_error_rate,
    )


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

    def to_dict(self) -> dict:
        return {
            "ceiling_rps_per_replica": self.ceiling_rps,
            "ceiling_from": self.ceiling_from,
            "headroom": self.headroom,
            "watermark_rps_per_replica": self.watermark_rps,
            "watermark_in_flight_per_replica": self.watermark_in_flight,
            "peak_rps": self.peak_rps,
            "replicas": self.replicas,
            "warnings": self.warnings,
        }


def make_plan(a: CurveAnalysis, peak_rps: float | None = None, headroom: float = DEFAULT_HEADROOM) -> Plan:
    if not 0 <= headroom < 1:
        raise ValueError("headroom must be at least 0% and below 100%")
    if peak_rps is not None and peak_rps <= 0:
        raise ValueError("the peak rate must be positive")
    warnings: list[str] = []
    candidates: list[tuple[float, str]] = []
    if a.knee is not None:
        candidates.append((a.knee.load, "knee"))
    else:
        warnings.append(f"{a.knee_ttft.reason}; the ceiling is not a knee")
    if a.slo is not None:
        if a.slo.load_rps is None:
            warnings.append(f"the SLO ({a.slo.percentile}) held at no step: no load meets it")
            candidates.append((0.0, "slo"))
        else:
            candidates.append((a.slo.load_rps, "slo"))
    if a.max_sustainable_rps is not None:
        candidates.append((a.max_sustainable_rps, "max_sustainable"))
    if a.inconsistent_steps:
        steps = ", ".join(str(s) for s in a.inconsistent_steps)
        warnings.append(f"Little's law fails at step(s) {steps}: the sweep is inconsistent, check them")
    invalid = [p.step for p in a.points if not p.valid]
    if invalid:
        warnings.append(f"client health invalid at step(s) {', '.join(map(str, invalid))}: left out")
    if not candidates:
        return Plan(None, "none", headroom, None, None, peak_rps, None, [*warnings, "no usable step"])
    ceiling, source = min(candidates, key=lambda c: c[0])
    watermark = ceiling * (1 - headroom)
    in_flight = _in_flight_at(a.points, watermark)
    replicas = None
    if peak_rps is not None:
        replicas = math.ceil(peak_rps / watermark) if watermark > 0 else None
        if replicas is None:
            warnings.append("watermark is zero: no replica count can carry the peak")
    return Plan(ceiling, source, headroom, watermark, in_flight, peak_rps, replicas, warnings)


def _in_flight_at(points: Sequence[LoadPoint], load: float) -> float | None:
    """Little's law at the watermark: load x mean E2E interpolated between the steps around it."""
    pairs = sorted(
        (p.achieved_rps, w / 1000) for p in points if p.ok and (w := p.pct("e2e_ms", "mean")) is not None
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
