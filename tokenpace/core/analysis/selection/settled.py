"""Did an open-loop run reach its steady state? Its halves, compared by intervals. Pure.

Near capacity an open-loop run's queue is still growing when a short run ends: its percentiles sit
below what the same rate gives once the queue has settled, so a line it meets proves nothing. The
run's measured requests, in send order, are split into an early and a late half, each summarised as
the whole run is (dependence-aware intervals at its effective sample size). A line met on such a
run is proven only when the whole run's percentile and the late half's rest on enough effective
requests (neighbours that moved together count as fewer: at least ``MIN_TAIL_SAMPLES`` beyond it;
near capacity a queue ties neighbours together and an interval from fewer is not 95 %), the late
half's upper bound is under the line, and the growth from the early half to the late one is not decided
upward: the 95 % interval of the late-minus-early difference (Zou and Donner's MOVER, from the two
halves' intervals) reaches zero or lies below it. Otherwise the line is undecided: a longer run at
that rate decides.

A closed loop holds at most its users in flight, so its queue is bounded; it is not split here
(latency that moves with time there is ``capacity.drift``'s).

The rule asks each half to carry what the whole run must: a P95 line needs at least 100 effective
requests per half (``core.stats.MIN_TAIL_SAMPLES`` beyond it), so a run must be about twice as long
as the whole-run rule alone would need.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from tokenpace.core.metrics import summarize
from tokenpace.core.record import RequestRecord
from tokenpace.core.stats import enough_samples, samples_needed

HALVES = ("early", "late")


def halves(records: Sequence[RequestRecord], open_loop: bool) -> dict[str, Any] | None:
    """The run's measured requests (warm-up and never-sent ones out, as ``summarize`` counts them)
    in send order, split in two and summarised: ``{"early": summary, "late": summary}`` (the
    ``Summary.to_dict`` form). None for a closed loop or fewer than two measured requests."""
    measured = sorted((r for r in records if not r.warmup and r.sent_ns), key=lambda r: r.sent_ns)
    if not open_loop or len(measured) < 2:
        return None
    mid = len(measured) // 2
    return {
        name: summarize(part, open_loop=True).to_dict()
        for name, part in zip(HALVES, (measured[:mid], measured[mid:]), strict=True)
    }


def growth_interval(
    early: float, early_ci: tuple[float, float], late: float, late_ci: tuple[float, float]
) -> tuple[float, float]:
    """95 % interval of late - early from the two estimates' own 95 % intervals (MOVER: each side's
    distance to its bound, combined in quadrature; the halves are taken as independent)."""
    diff = late - early
    lo = diff - math.hypot(late - late_ci[0], early_ci[1] - early)
    hi = diff + math.hypot(late_ci[1] - late, early - early_ci[0])
    return lo, hi


def few_effective(values: Mapping[str, float], key: str, pct: str, where: str = "") -> str:
    """Why the percentile ``key`` (``ttft_ms.p95``) cannot be proven from its effective sample
    size (requests that moved together count as fewer), or "" when it can."""
    n_eff = values.get(f"{key}.n_eff")
    if n_eff is None or enough_samples(n_eff, int(pct[1:])):
        return ""
    return (
        f"{pct.upper()}{where} rests on {n_eff:.0f} effective requests (neighbours moved together), "
        f"it needs {samples_needed(int(pct[1:]))}"
    )


def unsettled(values: Mapping[str, float], low: frozenset[str], key: str, pct: str, thr: float) -> str:
    """Why a line met on the whole run is not shown at the run's steady state ("" when it is, or
    when the run was not split: a closed loop, no records). ``values``: the flat run values, the
    halves under ``{key}.early`` / ``{key}.late`` (with ``.lo``, ``.hi``, ``.n_eff``)."""
    late, late_hi = values.get(f"{key}.late"), values.get(f"{key}.late.hi")
    if late is None or late_hi is None:
        return ""
    thin = few_effective(values, key, pct)
    if thin:
        return thin + " to show the run's steady state"
    early = values.get(f"{key}.early")
    name = pct.upper()
    if f"{key}.late" in low or early is None:
        return f"too few requests in the run's late half for {name} to show its steady state"
    thin = few_effective(values, f"{key}.late", pct, " of the late half")
    if thin:
        return thin + " to show the run's steady state"
    lo, hi = values.get(f"{key}.late.lo", late), late_hi
    e_lo, e_hi = values.get(f"{key}.early.lo", early), values.get(f"{key}.early.hi", early)
    rise_lo, _ = growth_interval(early, (e_lo, e_hi), late, (lo, hi))
    what = f"{name} {early:.4g} ms early, {late:.4g} ms late"
    if rise_lo > 0:
        return f"latency still rising through the step: {what}"
    if late_hi >= thr:
        return f"the run's late half does not prove it ({what}, late upper bound {late_hi:.4g} ms)"
    return ""
