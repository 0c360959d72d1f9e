"""Latency that moved with time, not with load: a trend inside a step, and a step revisited. Pure.

A sweep reads latency against load; if the server's latency also moves with wall-clock time (a
neighbour's load, thermal throttling, a cache warming or filling, a leak), the curve mixes the two
and a knee or a replica count read from it is wrong. Two checks, both on measured successful
requests:

- *Inside a step* (``time_trend``): the Spearman rank correlation of TTFT and E2E with the send
  time (open loop: from the scheduled time), on the middle 80 % of the step's requests (ramp-up and
  drain trimmed). The step *moved* when the correlation is significant (p < 0.001, normal
  approximation of Spearman's rho, at least 30 requests), the median of the last third differs
  from that of the first third by ``TREND_MIN_CHANGE`` or more and the two medians' 95 % intervals
  are apart. In a closed loop of C users the requests of one cycle share the engine's batch (an
  engine that finishes them in waves gives them one latency): they are one observation, not C, so
  the p-value and the intervals count n / C observations (at 64 users a 10 s step is a handful).
  In closed loop a steady step has no trend: one that moved is drift. In open loop a rising trend
  is also what a growing queue looks like (the server falls behind the arrivals): the overload
  check reads it as saturation.
- *A step revisited* (``revisit_check``, ``sweep --revisit``, on by default for 3 steps or more):
  the first step is run again after the last; the load is the same, so its TTFT and E2E P50 should
  be too. Latency moved with time when a P50's 95 % intervals of the two runs do not overlap and
  the P50 changed by ``REVISIT_MIN_CHANGE`` or more.

Either move counts only when it is also ``SHARE_OF_RANGE`` of the range the metric's P50 spans
across the sweep's steps: a few milliseconds of noise beside a curve that rises tenfold changes no
knee; the same move on a curve that rose only by it is the whole curve.

And only when it exceeds the noise the host explains (``noise_floor``): two runs of an unchanged
server differ by their run-to-run SD (``evidence.runnoise``: learned from repeated runs, else the
assumed 5 % for a P50) -- in 95 % of pairs by less than exp(1.96 x sqrt(2) x SD) - 1, 14 % at 5 %. A
revisit moved when the log of its P50 ratio is beyond 1.96 x sqrt(se_first^2 + se_again^2 + 2 SD^2)
(the sampling SEs from the P50s' intervals). A trend inside a step is declared drift when its change
exceeds that floor, its thirds' medians' intervals are apart, and, when the revisit was compared and
did not move, also exceeds the change the revisit saw: the same load, run at the sweep's two ends,
shows what time alone did to this server; a larger move inside one step came from the step itself
(a queue settling at a load past the knee), not from time. The same floor gates the open-loop
overload check's rising trend (``little``): host noise at a tenth of the capacity is no queue.

Every trend a step flagged is reported, even where no figure moves (``Drift.detected``: a move
smaller than a quarter of the curve's range, a falling open-loop step after a cold start, a step left
out, the revisit, a probe or a short attempt off the curve), with why the figures stand.

What it cannot tell: drift slower than the noise of one step, or drift that comes back to where it
started by the revisit; a sweep run in one order cannot tell a slow drift from load alone.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any

import numpy as np

from tokenpace.core.analysis.capacity.loadpoint import LoadPoint
from tokenpace.core.analysis.evidence.runnoise import ASSUMED_CENTRE_SD
from tokenpace.core.metrics import e2e_ns, ttft_ns
from tokenpace.core.record import RequestRecord, Status
from tokenpace.core.stats import percentile_ci, rank_bounds

TREND_P = 0.001
TREND_MIN_CHANGE = 0.10  # a 10 % move from the step's first third to its last
REVISIT_MIN_CHANGE = 0.20
SHARE_OF_RANGE = 0.25  # a move that matters to the curve: a quarter of its P50 range across the steps
MIN_TREND_SAMPLES = 30
MAX_TREND_SAMPLES = 5000  # larger steps are thinned evenly (bounds the sort; rho barely moves)
TRIM = 0.10  # of the requests at each end of a step: ramp-up and drain
Z95 = NormalDist().inv_cdf(0.975)


def noise_floor(rel_sd: float = ASSUMED_CENTRE_SD) -> float:
    """The relative change of a P50 between two runs of an unchanged server in 95 % of pairs, when
    runs differ by ``rel_sd`` (their between-run SD in log terms)."""
    return math.expm1(Z95 * math.sqrt(2) * rel_sd)


@dataclass(frozen=True, slots=True)
class Trend:
    metric: str  # ttft_ms | e2e_ms
    n: int
    rho: float  # Spearman rank correlation with time
    p_value: float
    first_ms: float  # median of the first third
    last_ms: float  # median of the last third
    first_ci: tuple[float, float] | None = None  # the medians' 95 % intervals
    last_ci: tuple[float, float] | None = None

    @property
    def change(self) -> float:
        return self.last_ms / self.first_ms - 1 if self.first_ms > 0 else 0.0

    @property
    def moved(self) -> bool:
        apart = self.first_ci is None or self.last_ci is None or _apart(self.first_ci, self.last_ci)
        return self.p_value < TREND_P and abs(self.change) >= TREND_MIN_CHANGE and apart

    def to_dict(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "n": self.n,
            "spearman_rho": self.rho,
            "p_value": self.p_value,
            "first_third_p50_ms": self.first_ms,
            "last_third_p50_ms": self.last_ms,
            "first_third_ci_ms": list(self.first_ci) if self.first_ci else None,
            "last_third_ci_ms": list(self.last_ci) if self.last_ci else None,
            "change": self.change,
            "moved": self.moved,
        }


def _ranks(x: np.ndarray) -> np.ndarray:
    order = np.argsort(x, kind="mergesort")
    ranks = np.empty(len(x))
    ranks[order] = np.arange(len(x))
    return ranks


def time_trend(
    times: Sequence[float], values: Sequence[float], metric: str, cluster: int = 1
) -> Trend | None:
    """None when fewer than MIN_TREND_SAMPLES pairs remain after trimming. ``cluster``: how many
    requests share one observation's worth of the server's state (a closed loop's C users: the
    requests of one cycle are batched together); the p-value and the medians' intervals count
    n / cluster independent observations."""
    order = np.argsort(np.asarray(times, dtype=np.float64), kind="mergesort")
    t = np.asarray(times, dtype=np.float64)[order]
    v = np.asarray(values, dtype=np.float64)[order]
    cut = int(len(t) * TRIM)
    t, v = t[cut : len(t) - cut], v[cut : len(v) - cut]
    if len(t) > MAX_TREND_SAMPLES:
        keep = np.linspace(0, len(t) - 1, MAX_TREND_SAMPLES).astype(int)
        t, v = t[keep], v[keep]
    n = len(t)
    if n < MIN_TREND_SAMPLES:
        return None
    rt, rv = _ranks(t), _ranks(v)
    sd = float(np.std(rt) * np.std(rv))
    rho = float(np.mean((rt - rt.mean()) * (rv - rv.mean())) / sd) if sd > 0 else 0.0
    n_eff = max(2.0, n / max(1, cluster))
    p = 2 * (1 - NormalDist().cdf(abs(rho) * math.sqrt(n_eff - 1)))
    third = n // 3
    first, last = np.sort(v[:third]), np.sort(v[-third:])
    return Trend(
        metric,
        n,
        rho,
        p,
        float(np.median(first)),
        float(np.median(last)),
        _median_ci(first, cluster),
        _median_ci(last, cluster),
    )


def _median_ci(sorted_values: np.ndarray, cluster: int) -> tuple[float, float]:
    """The median's 95 % interval counting len / cluster independent observations."""
    if cluster <= 1:
        return percentile_ci(sorted_values, 50)
    n_eff = max(1, round(len(sorted_values) / cluster))
    if n_eff < 2:
        return float(sorted_values[0]), float(sorted_values[-1])
    lo, hi = rank_bounds(n_eff, 0.5, 0.025)
    q = np.quantile(sorted_values, [lo / (n_eff - 1), hi / (n_eff - 1)])
    return float(q[0]), float(q[1])


def _apart(a: Sequence[float], b: Sequence[float]) -> bool:
    return a[1] < b[0] or b[1] < a[0]


def beyond_noise(metric: dict[str, Any], floor: float) -> bool:
    """A stored trend (``Trend.to_dict``) that moved by more than ``floor`` (relative)."""
    return bool(metric.get("moved")) and abs(float(metric.get("change") or 0.0)) >= floor


def rising_beyond_noise(trend: dict[str, Any] | None, floor: float | None = None) -> bool:
    """Latency rose through the step by more than the host's noise explains (the overload check)."""
    cut = noise_floor() if floor is None else floor
    return any(
        beyond_noise(m, cut) and float(m.get("change") or 0.0) > 0 for m in (trend or {}).get("metrics") or []
    )


def step_trends(records: Sequence[RequestRecord], open_loop: bool) -> list[Trend]:
    """TTFT and E2E against the send time (open loop: both from the scheduled time). A closed loop's
    users (the records' ``worker``) are one cluster: their requests of a cycle share a batch."""
    ok = [r for r in records if not r.warmup and r.status is Status.OK and r.sent_ns]
    cluster = 1 if open_loop else len({r.worker for r in ok})
    out = []
    for metric, fn in (("ttft_ms", ttft_ns), ("e2e_ms", e2e_ns)):
        times, values = [], []
        for r in ok:
            value = fn(r)
            if value is None:
                continue
            start = r.scheduled_ns if open_loop and r.scheduled_ns else r.sent_ns
            times.append(start / 1e9)
            values.append((value + r.sent_ns - start) / 1e6)
        trend = time_trend(times, values, metric, cluster)
        if trend is not None:
            out.append(trend)
    return out


def trend_dict(records: Sequence[RequestRecord], open_loop: bool) -> dict[str, Any]:
    """What a sweep step stores as ``time_trend``."""
    trends = step_trends(records, open_loop)
    return {
        "basis": "scheduled" if open_loop else "send",
        "moved": any(t.moved for t in trends),
        "rising": any(t.moved and t.change >= noise_floor() for t in trends),  # beyond the assumed noise
        "metrics": [t.to_dict() for t in trends],
    }


def _trend_matters(trend: dict[str, Any], ranges: dict[str, float], floor: float) -> bool:
    return any(
        beyond_noise(m, floor)
        and abs(m["last_third_p50_ms"] - m["first_third_p50_ms"]) >= SHARE_OF_RANGE * ranges[m["metric"]]
        for m in trend.get("metrics") or []
        if m.get("metric") in ranges
    )


def trend_note(step: int, trend: dict[str, Any]) -> str:
    moved = [m for m in trend.get("metrics") or [] if m.get("moved")]
    parts = ", ".join(
        f"{m['metric'][:-3].upper()} P50 {m['first_third_p50_ms']:.4g} -> {m['last_third_p50_ms']:.4g} ms"
        for m in moved
    )
    return f"step {step}: {parts} from its first third to its last"


@dataclass(frozen=True, slots=True)
class Revisit:
    step: int  # the step revisited
    moved: bool
    notes: list[str]
    change: float = 0.0  # the largest relative P50 change seen (moved or not)

    def to_dict(self) -> dict[str, Any]:
        return {"step": self.step, "moved": self.moved, "notes": self.notes, "largest_change": self.change}


def _ranges(points: Sequence[LoadPoint]) -> dict[str, float]:
    out = {}
    for metric in ("ttft_ms", "e2e_ms"):
        p50s = [v for p in points if p.usable and (v := p.slo_pct(metric, "p50")) is not None]
        out[metric] = max(p50s) - min(p50s) if p50s else 0.0
    return out


def _closed(ci: tuple[float, float], value: float) -> tuple[float, float]:
    """A P50's interval with a side the run cannot bound (infinite) mirrored, in log, from its
    finite side: the noise that side shows, so that drift inside a step is still seen. Neither
    side bounded (the step's requests moved together as a whole, as under a trend): the value
    alone, leaving the noise between runs, which holds that of one run, to explain a change."""
    lo, hi = ci
    if math.isinf(hi) and math.isfinite(lo) and lo > 0:
        return lo, value * value / lo
    if math.isinf(lo) and math.isfinite(hi):
        return value * value / hi, hi
    return (value, value) if math.isinf(lo) or math.isinf(hi) else ci


def _log_se(ci: tuple[float, float], value: float, upward: bool) -> float:
    """The SE (log) of a P50 on the side of its interval that faces the other run's (above it where
    ``upward``)."""
    bound = ci[1] if upward else ci[0]
    return abs(math.log(bound) - math.log(value)) / Z95 if bound > 0 else 0.0


def revisit_check(
    first: LoadPoint,
    again: LoadPoint,
    ranges: dict[str, float] | None = None,
    rel_sd: float = ASSUMED_CENTRE_SD,
) -> Revisit:
    """The same load run again at the end of the sweep: did its P50 latencies move (by a share of
    the curve's range, when ``ranges`` gives it per metric, and beyond the sampling and run-to-run
    noise of two runs)?"""
    notes, moved, largest = [], False, 0.0
    for metric in ("ttft_ms", "e2e_ms"):
        a, b = first.slo_pct(metric, "p50"), again.slo_pct(metric, "p50")
        ca, cb = first.slo_ci(metric, "p50"), again.slo_ci(metric, "p50")
        if a is None or b is None or ca is None or cb is None or a <= 0 or b <= 0:
            continue
        change = b / a - 1
        largest = max(largest, abs(change))
        ca, cb = _closed(ca, a), _closed(cb, b)
        noise = Z95 * math.sqrt(_log_se(ca, a, b > a) ** 2 + _log_se(cb, b, a > b) ** 2 + 2 * rel_sd**2)
        beyond = _apart(ca, cb) and abs(math.log(b / a)) > noise
        matters = ranges is None or abs(b - a) >= SHARE_OF_RANGE * ranges.get(metric, 0.0)
        if beyond and abs(change) >= REVISIT_MIN_CHANGE and matters:
            moved = True
            name = metric[:-3].upper()
            notes.append(f"{name} P50 {a:.4g} ms at first, {b:.4g} ms when revisited ({change:+.0%})")
    return Revisit(first.step, moved, notes, largest)


@dataclass(frozen=True, slots=True)
class Drift:
    moved: bool
    reasons: list[str]
    revisit: Revisit | None
    note: str = ""  # why a step run again was not compared
    rel_sd: float = ASSUMED_CENTRE_SD  # the run-to-run SD the verdict allowed for
    trend_floor: float = 0.0  # the relative change a trend inside a step had to exceed
    within_noise: list[str] = field(default_factory=list)  # trends seen but explained by noise
    # every other trend a step flagged (moved), with why the figures stand: reported, never dropped
    detected: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "latency_moved_with_time": self.moved,
            "reasons": self.reasons,
            "revisit": self.revisit.to_dict() if self.revisit else None,
            "revisit_not_compared": self.note or None,
            "noise": {
                "run_to_run_sd": self.rel_sd,
                "trend_floor": self.trend_floor,
                "trends_within_noise": self.within_noise,
            },
            "detected_figures_stand": self.detected,
        }


def _revisit(
    points: Sequence[LoadPoint], revisit: LoadPoint | None, ranges: dict[str, float], rel_sd: float
) -> tuple[Revisit | None, str]:
    first = next((p for p in points if revisit is not None and p.offered == revisit.offered), None)
    if revisit is not None and not revisit.usable:
        return None, f"the revisit was left out ({', '.join(revisit.left_out_reasons)})"
    if first is not None and not first.usable:
        return None, f"step {first.step}, revisited, was left out ({', '.join(first.left_out_reasons)})"
    if revisit is not None and first is not None:
        return revisit_check(first, revisit, ranges, rel_sd), ""
    return None, ""


def _flagged(trend: dict[str, Any] | None) -> bool:
    return any(m.get("moved") for m in (trend or {}).get("metrics") or [])


def _why_figures_stand(p: LoadPoint) -> str:
    """Why a step's flagged trend moves no figure (a step on the curve, not declared drift)."""
    if not p.usable:
        return "the step is left out of every figure"
    if p.mode == "open_loop":
        rising = any(m.get("moved") and float(m.get("change") or 0) > 0 for m in (p.trend or {})["metrics"])
        if rising:
            return "an open loop's rising latency reads as a growing queue: Little's law's overload check"
        return (
            "latency fell through the step (a cold start or a warm-up): its percentiles hold its slow start"
        )
    return f"less than {SHARE_OF_RANGE:.0%} of the curve's range: no figure moves"


def detect_drift(
    points: Sequence[LoadPoint],
    revisit: LoadPoint | None,
    rel_sd: float = ASSUMED_CENTRE_SD,
    off_curve: Sequence[tuple[str, dict[str, Any] | None]] = (),
) -> Drift:
    """Closed-loop steps whose latency moved inside the step beyond the noise, and the revisited
    step's P50s. Open-loop steps' rising trends are left to the overload check (a growing queue).
    ``rel_sd``: the run-to-run SD of a P50 (``evidence.runnoise``; the assumed 5 % by default).
    Every other trend a step flagged is reported in ``detected`` with why the figures stand: steps
    on the curve, the revisit, and ``off_curve`` steps ((name, time_trend): probes, short attempts)."""
    ranges = _ranges(points)
    check, note = _revisit(points, revisit, ranges, rel_sd)
    floor = noise_floor(rel_sd)
    if check is not None and not check.moved:
        floor = max(floor, check.change)  # what time alone did to the same load, end to end
    reasons, within, detected = [], [], []
    for p in points:
        if not (p.trend and _flagged(p.trend)):
            continue
        said = trend_note(p.step, p.trend)
        if p.usable and p.mode == "closed_loop" and _trend_matters(p.trend, ranges, floor):
            reasons.append("latency moved inside " + said)
        elif p.usable and p.mode == "closed_loop" and _trend_matters(p.trend, ranges, 0.0):
            within.append(said + f" (within the {floor:.0%} noise)")
        else:
            detected.append(f"{said} ({_why_figures_stand(p)})")
    extra = [("the revisit", revisit.trend if revisit else None), *off_curve]
    for name, trend in extra:
        if _flagged(trend):
            said = trend_note(0, trend or {}).replace("step 0", name, 1)
            detected.append(f"{said} (off the curve: no figure rests on it)")
    if check is not None and check.moved:
        reasons.append(f"step {check.step} revisited at the end: " + "; ".join(check.notes))
    return Drift(bool(reasons), reasons, check, note, rel_sd, floor, within, detected)
