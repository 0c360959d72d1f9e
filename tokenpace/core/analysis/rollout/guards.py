"""Guard rails of a gray release: how much worse the new arm may be than the reference before it is
rolled back (``ttft.p95=+10%,error_rate=+0.5pp,complaint=+0pp``). Pure.

- ``METRIC.pNN=+X%``: the percentile may grow by at most X % (TTFT, TPOT, E2E, ITL).
- ``error_rate=+Xpp``, ``interruption_rate=+Xpp``: the share may grow by at most X percentage points.
- ``EVENT=+Xpp`` (any reported event): the share of users with the event may grow by at most X
  points; ``EVENT.per_request=...`` takes the share of requests instead. ``-Xpp`` guards a good
  event (``task_completed=-2pp``: it may fall by at most 2 points).

Each guard is a non-inferiority test of a candidate arm against the reference: ``pass`` only when
the whole interval of the change is inside the limit (its worse bound under it: the candidate is
shown to be no worse than allowed), ``breached`` when the whole interval is beyond it, and
``undecided`` otherwise -- the interval straddles the limit, or too few samples to estimate it.

The interval is always valid (anytime): an operator may look at any moment and a step may stop
early either way without raising the error rate. The change's estimate (a percentile's log ratio,
a share's difference) is asymptotically a Gaussian martingale in its information I = 1 / SE^2 as
traffic arrives, and Robbins' normal mixture bounds it at every look at once (``sequential``):
change +- sqrt((I + r) log((I + r) / (r alpha^2))) / I. The SE is the fixed-sample interval's
(bootstrap for a percentile, Newcombe's hybrid score for a share: never zero, also with no errors
at all). r, fixed before any traffic, is the information at which a change of the guard's
limit is seen by a fixed-sample test: ``r = (z / limit)^2`` -- the interval is tightest near where
it decides (a limit of 0 tunes it at 5 % or 5 pp instead).

An undecided guard says how much traffic per arm would decide it if the estimate held: the n at
which the anytime interval's half-width falls under the estimate's distance from the limit, with
the SE now scaled as 1 / sqrt(n) (so the information grows as n) and the mixture's own log term
(the interval narrows a little slower than 1 / sqrt(n)); never fewer than one more than now. An
estimate on the limit has no such n. With the time that means at the smaller arm's traffic in the
window.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

from tokenpace.core.analysis.evidence.sequential import mixture_half_width

LATENCY_METRICS = ("ttft", "tpot", "e2e", "itl")
RATE_METRICS = ("error_rate", "interruption_rate")
_ITEM = re.compile(r"^([A-Za-z][A-Za-z0-9_.:-]*)=([+-]?)(\d+(?:\.\d+)?)(%|pp)$")
_LATENCY = re.compile(r"^(ttft|tpot|e2e|itl)\.p(\d+(?:\.\d+)?)$")


@dataclass(frozen=True, slots=True)
class Guard:
    name: str  # "ttft.p95", "error_rate", "complaint", "complaint.per_request"
    limit: float  # 0.10 for 10 % (relative), 0.005 for 0.5 pp (absolute)
    relative: bool
    higher_is_worse: bool = True

    @property
    def text(self) -> str:
        sign = "+" if self.higher_is_worse else "-"
        return f"{self.name}={sign}{self.limit * 100:g}{'%' if self.relative else 'pp'}"

    @property
    def percentile(self) -> tuple[str, float] | None:
        m = _LATENCY.match(self.name)
        return (m.group(1), float(m.group(2))) if m else None

    @property
    def event(self) -> tuple[str, bool] | None:
        """(event name, per request?) for a business event's guard."""
        if self.percentile is not None or self.name in RATE_METRICS:
            return None
        base, dot, unit = self.name.rpartition(".")
        if dot and unit == "per_request":
            return base, True
        return self.name, False


def parse_guards(text: str) -> list[Guard]:
    """Raises ValueError with one line for the user."""
    out = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        m = _ITEM.match(part.replace(" ", ""))
        if not m:
            raise ValueError(
                f"{part!r}: expected NAME=+X% or NAME=+Xpp, e.g. ttft.p95=+10%,error_rate=+0.5pp"
            )
        name, sign, number, unit = m.group(1), m.group(2), float(m.group(3)), m.group(4)
        relative = unit == "%"
        latency = _LATENCY.match(name)
        if latency is not None:
            if not relative:
                raise ValueError(f"{part!r}: a percentile's limit is relative, e.g. {name}=+10%")
            if not 0 < float(latency.group(2)) < 100:
                raise ValueError(f"{part!r}: the percentile must be between 0 and 100")
        elif relative:
            raise ValueError(f"{part!r}: a rate's limit is in percentage points, e.g. {name}=+0.5pp")
        elif name.split(".")[0] in LATENCY_METRICS:
            raise ValueError(f"{part!r}: a latency guard names a percentile, e.g. ttft.p95=+10%")
        out.append(Guard(name, number / 100, relative, sign != "-"))
    if not out:
        raise ValueError("no guard given; e.g. --guard ttft.p95=+10%,error_rate=+0.5pp")
    return out


@dataclass(frozen=True, slots=True)
class GuardItem:
    guard: Guard
    arm: str  # the candidate arm, judged against the reference
    change: float | None  # B - A: relative for a percentile, absolute (0.005 = 0.5 pp) for a rate
    ci: tuple[float | None, float | None] | None
    outcome: str  # pass, hold, breached, undecided
    reason: str
    needed: int | None = None  # samples per arm at which the anytime interval decides (or decided)
    effective: tuple[int, int] | None = None  # too few to estimate: effective samples (now, needed)

    def to_dict(self) -> dict[str, Any]:
        return {
            "guard": self.guard.text,
            "arm": self.arm,
            "change": self.change,
            "ci": list(self.ci) if self.ci else None,
            "outcome": self.outcome,
            "reason": self.reason,
            "needed_per_arm": self.needed,
            "effective_per_arm": (
                {"now": self.effective[0], "needed": self.effective[1]} if self.effective else None
            ),
            "interval": "anytime (normal mixture)",
        }


@dataclass(frozen=True, slots=True)
class Evidence:
    """What a guard is judged on: the change B - A, its fixed-sample SE (on the log scale for a
    percentile), the samples per arm behind it (the fewer of the two) and the smaller arm's traffic."""

    change: float | None
    se: float | None
    n: int = 0
    unit: str = "requests"
    per_s: float | None = None  # the smaller arm's requests (or users) per second in the window


# Where a guard of limit 0 (``complaint=+0pp``: no worse at all) tunes its interval instead: clear
# harm (5 %, 5 pp) is caught early.
MIN_TUNING = {True: math.log1p(0.05), False: 0.05}  # relative (log), absolute (pp)


def mixture_r(guard: Guard, alpha: float) -> float:
    """The mixture's precision, fixed before any traffic: the information at which a change of the
    guard's limit is seen at ``alpha`` by a fixed-sample test."""
    z = NormalDist().inv_cdf(1 - alpha / 2)
    scale = math.log1p(guard.limit) if guard.relative else guard.limit
    return (z / (scale if scale > 0 else MIN_TUNING[guard.relative])) ** 2


def anytime_interval(guard: Guard, ev: Evidence, alpha: float) -> tuple[float, float] | None:
    if ev.change is None or ev.se is None or not ev.se >= 0:
        return None
    half = mixture_half_width(1 / ev.se**2, mixture_r(guard, alpha), alpha) if ev.se > 0 else 0.0
    if guard.relative:
        log_r = math.log1p(max(ev.change, -1 + 1e-12))  # a change of -100 % or less has no log
        return _expm1(log_r - half), _expm1(log_r + half)
    return ev.change - half, ev.change + half


def _expm1(x: float) -> float:
    """exp(x) - 1, infinite past what a float holds (a wide interval on little traffic)."""
    return math.expm1(x) if x < 700 else math.inf


MAX_MULTIPLE = 1e6  # traffic (a multiple of the window's) past which no count is given: at the limit


def needed(guard: Guard, ev: Evidence, alpha: float) -> int | None:
    """Samples per arm at which the anytime interval, where the estimate is now, would clear the
    limit: its half-width under the estimate's distance from the limit (on the log scale for a
    percentile), at least one more than now. None: no SE, a limit of 0 (equal arms never clear it),
    or an estimate at the limit (no traffic within ``MAX_MULTIPLE`` of the window's decides it)."""
    scale = math.log1p(guard.limit) if guard.relative else guard.limit
    if ev.change is None or ev.se is None or not ev.se > 0 or ev.n <= 0 or scale <= 0:
        return None
    line = (1.0 if guard.higher_is_worse else -1.0) * guard.limit
    if guard.relative:
        dist = abs(math.log1p(max(ev.change, -1 + 1e-12)) - math.log1p(max(line, -1 + 1e-12)))
    else:
        dist = abs(ev.change - line)
    r = mixture_r(guard, alpha)
    if not mixture_half_width(MAX_MULTIPLE / ev.se**2, r, alpha) < dist:
        return None
    lo, hi = 1e-3, MAX_MULTIPLE  # multiples of the traffic so far; the half-width falls with it
    for _ in range(80):
        mid = math.sqrt(lo * hi)
        if mixture_half_width(mid / ev.se**2, r, alpha) < dist:
            hi = mid
        else:
            lo = mid
    return max(math.ceil(hi * ev.n), ev.n + 1)


def judge(guard: Guard, arm: str, ev: Evidence, alpha: float = 0.05) -> GuardItem:
    """The guard's outcome from the always-valid interval of the change, with the traffic per arm
    that decides it and the time that means."""
    ci = anytime_interval(guard, ev, alpha)
    if ev.change is None or ci is None:
        return GuardItem(guard, arm, ev.change, None, "undecided", "too few samples to estimate the change")
    change = ev.change
    sign = 1.0 if guard.higher_is_worse else -1.0
    worse_lo, worse_hi = sorted((sign * ci[0], sign * ci[1]))
    shown = _fmt(change, guard.relative)
    allowed = _fmt(sign * guard.limit, guard.relative)
    bounds = f"[{_fmt(ci[0], guard.relative)}, {_fmt(ci[1], guard.relative)}]"
    at = f" (decided at {ev.n:,} {ev.unit} per arm)" if ev.n else ""
    done = ev.n or None
    if worse_lo > guard.limit:
        return GuardItem(
            guard, arm, change, ci, "breached", f"{shown} {bounds}: all of it beyond {allowed}{at}", done
        )
    if worse_hi < guard.limit:
        return GuardItem(
            guard, arm, change, ci, "pass", f"{shown} {bounds}: all of it within {allowed}{at}", done
        )
    need = needed(guard, ev, alpha)
    reason = f"{shown} {bounds} straddles {allowed}; {_more_needed(need, guard, ev)}"
    return GuardItem(guard, arm, change, ci, "undecided", reason, need)


def _more_needed(need: int | None, guard: Guard, ev: Evidence) -> str:
    if need is None and ev.se and guard.limit <= 0:
        return (
            "a limit of 0 passes only on a proven improvement: give a margin (e.g. +0.5pp) to pass equal arms"
        )
    if need is None and ev.se and ev.n > 0:
        return "the change sits at the limit: no finite traffic decides it"
    if need is None:
        return "no estimate of its noise yet"
    head = f"about {need:,} {ev.unit} per arm would decide it (n {ev.n:,} now) if the estimate held"
    if ev.per_s is None or ev.per_s <= 0:
        return head
    wait = max(need - ev.n, 0) / ev.per_s
    return f"{head}: about {duration(wait)} more at the current {ev.per_s:.3g} {ev.unit}/s on the smaller arm"


def duration(seconds: float) -> str:
    if seconds < 120:
        return f"{math.ceil(seconds)} s"  # never "0 s" for more traffic still to come
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _fmt(value: float, relative: bool) -> str:
    return f"{value:+.1%}" if relative else f"{value * 100:+.2f}pp"


def check_event_guards(guards: Sequence[Guard], known: Sequence[str]) -> None:
    """A guard on an event nobody reported (a misspelled name) would compare zero with zero: refused,
    with the names that were reported. Raises ValueError (one line for the user)."""
    for g in guards:
        name = g.event[0] if g.event else None
        if name is not None and name not in known:
            listed = ", ".join(sorted(known)) or "none reported in this window"
            raise ValueError(f"--guard {g.text}: no event {name!r} was reported (known events: {listed})")
