"""Little's law (L = X x W: requests in flight = completion rate x mean latency) on each sweep step. Pure.

Rate and latency come from the same requests: the steady window's rate with the mean E2E of the
requests it rests on (``steady``), else the whole step's. A step found *inconsistent* is left out of
every capacity figure (``loadpoint``): a rate that puts more requests in flight than a closed loop has
users, or a step that ran below its load, carries no ceiling.

Closed loop: in the steady window C users keep C requests in flight; over a whole step (no steady
window measured, older files) C users sharing n requests keep n / ceil(n / C) on average, less when
ramp-up and drain are a large part of a short step. A step far below that was not run at the load it
claims (client lag, a connection cap, too short a step); a step above it has a wrong rate or latency.
Open loop: in the steady window the step should complete send rate x ok / sent requests per second (over a
whole step: ok / (sent / rate + W)); more means the numbers are wrong. Tolerance: max(20 %, 3 / sqrt(n)),
the Poisson noise of n requests. The server is *overloaded* (a growing queue: saturation, whatever
the step's length) when it completed 20 % fewer than were due -- the sends are counted, so the
shortfall is not arrival noise -- or when latency from the scheduled time rose through the step by
more than the host's noise explains (its ``time_trend`` beyond ``drift.noise_floor``: a run-to-run
SD's worth of host noise at a tenth of the capacity is no growing queue). ``floor``: that relative
change (default: the assumed run-to-run SD's).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from tokenpace.core.analysis.capacity.drift import rising_beyond_noise
from tokenpace.core.analysis.capacity.loadpoint import LoadPoint

LITTLE_MIN_TOLERANCE = 0.2


@dataclass(frozen=True, slots=True)
class LittleCheck:
    step: int
    status: str  # ok | inconsistent | overloaded | skipped
    in_flight: float | None  # L = X * W
    expected: float | None  # what the step's load implies (in flight, or completions/s for open loop)
    ratio: float | None  # measured / expected
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "status": self.status,
            "in_flight": self.in_flight,
            "expected": self.expected,
            "ratio": self.ratio,
            "note": self.note,
        }


def _closed(p: LoadPoint, in_flight: float, tol: float) -> LittleCheck:
    c = int(p.offered or 1)
    # steady window: C in flight; whole step: n requests shared by C users, drain included
    expected = float(c) if p.steady or not p.sent else p.sent / math.ceil(p.sent / c)
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


def _open(p: LoadPoint, in_flight: float, w: float, tol: float, floor: float | None) -> LittleCheck:
    rate = float(p.offered or 0.0)
    if rate <= 0 or not p.sent:
        return LittleCheck(p.step, "skipped", in_flight, None, None, "no offered rate")
    # steady window: completions keep pace with the sends (the rate really sent, which a random
    # arrival process puts off the rate asked); whole step: the drain after the last send included
    sent_rate = p.sent_rps or rate
    expected_rps = sent_rate * p.ok / p.sent if p.steady else p.ok / (p.sent / rate + w)
    ratio = p.achieved_rps / expected_rps
    if p.max_concurrency and in_flight > p.max_concurrency * (1 + tol):
        note = f"{in_flight:.1f} in flight exceeds the cap of {p.max_concurrency}: rate or latency is wrong"
        return LittleCheck(p.step, "inconsistent", in_flight, expected_rps, ratio, note)
    # a queue that grows: completions well short of the sends (the sends are counted, so this is
    # no Poisson noise), or latency from the schedule rising through the step
    queue_growing = rising_beyond_noise(p.trend, floor)
    if ratio < 1 - LITTLE_MIN_TOLERANCE or queue_growing:
        why = "latency from the schedule rose through the step" if queue_growing else "a growing queue"
        note = (
            f"completed {p.achieved_rps:.3g} req/s where {expected_rps:.3g} were due (ratio {ratio:.2f}); "
            f"{why}: the server fell behind the offered rate (saturated, beyond capacity)"
        )
        return LittleCheck(p.step, "overloaded", in_flight, expected_rps, ratio, note)
    if ratio > 1 + tol:
        note = f"completed {p.achieved_rps:.3g} req/s, more than {expected_rps:.3g} due: numbers are wrong"
        return LittleCheck(p.step, "inconsistent", in_flight, expected_rps, ratio, note)
    return LittleCheck(p.step, "ok", in_flight, expected_rps, ratio)


def little_check(p: LoadPoint, max_error_rate: float = 0.05, floor: float | None = None) -> LittleCheck:
    """W is the mean E2E of the requests the rate rests on (the steady window's, when the step
    carries it), so that rate and latency come from the same requests."""
    w_ms = p.steady_latency_ms if p.steady_latency_ms is not None else p.pct("e2e_ms", "mean")
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
        return _closed(p, in_flight, tol)
    return _open(p, in_flight, w, tol, floor)
