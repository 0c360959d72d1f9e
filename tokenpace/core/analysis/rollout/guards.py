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
``undecided`` otherwise -- the interval straddles the limit, or too few samples to estimate it. An
undecided guard says about how many more users (or requests) per arm would decide it: the
interval's half-width shrinks as 1 / sqrt(n), so deciding needs n x (half-width / distance of the
estimate from the limit)^2 (an estimate on the limit is decided by no sample size).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

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

    def to_dict(self) -> dict[str, Any]:
        return {
            "guard": self.guard.text,
            "arm": self.arm,
            "change": self.change,
            "ci": list(self.ci) if self.ci else None,
            "outcome": self.outcome,
            "reason": self.reason,
        }


def judge(
    guard: Guard,
    arm: str,
    change: float | None,
    ci: tuple[float | None, float | None] | None,
    n: int | None = None,
    unit: str = "users",
) -> GuardItem:
    """The guard's outcome from the change B - A and its confidence interval; ``n``: the samples per
    arm behind it (the fewer of the two), to say how many more would decide an undecided guard."""
    if change is None or ci is None or ci[0] is None or ci[1] is None:
        return GuardItem(guard, arm, change, ci, "undecided", "too few samples to estimate the change")
    sign = 1.0 if guard.higher_is_worse else -1.0
    worse = sign * change
    worse_lo, worse_hi = sorted((sign * ci[0], sign * ci[1]))
    shown = _fmt(change, guard.relative)
    allowed = _fmt(sign * guard.limit, guard.relative)
    bounds = f"[{_fmt(ci[0], guard.relative)}, {_fmt(ci[1], guard.relative)}]"
    if worse_lo > guard.limit:
        return GuardItem(guard, arm, change, ci, "breached", f"{shown} {bounds}: all of it beyond {allowed}")
    if worse_hi < guard.limit:
        return GuardItem(guard, arm, change, ci, "pass", f"{shown} {bounds}: all of it within {allowed}")
    reason = f"{shown} {bounds} straddles {allowed}"
    more = _more_needed(worse, worse_lo, worse_hi, guard.limit, n, f"{unit} per arm")
    return GuardItem(guard, arm, change, ci, "undecided", f"{reason}; {more}" if more else reason)


def _more_needed(worse: float, lo: float, hi: float, limit: float, n: int | None, unit: str) -> str:
    if not n:
        return ""
    distance = abs(limit - worse)
    half = (hi - lo) / 2
    if distance <= 1e-12 * max(1.0, abs(limit)) or half <= 0:
        return "the estimate sits on the limit: no sample size decides it"
    needed = math.ceil(n * (half / distance) ** 2)
    return f"about {max(needed - n, 1):,} more {unit} would decide it (n {n:,} now)"


def _fmt(value: float, relative: bool) -> str:
    return f"{value:+.1%}" if relative else f"{value * 100:+.2f}pp"
