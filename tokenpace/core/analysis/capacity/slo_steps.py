"""The SLO judged at each sweep step, by the percentile's 95 % interval, and the load it holds to. Pure.

A step *holds* the SLO when, for every metric the SLO names, the upper bound of the interval of its
percentile is under the line (and errors stay at or below the limit); it *breaks* it when some
lower bound is over the line (or errors exceed the limit); otherwise it is *undecided*: the interval
straddles the line and more requests at that load would decide it. Where the step's requests moved
together (a queue, a stall) the interval is taken at the effective sample size, and where that
leaves fewer than ``MIN_TAIL_SAMPLES`` effective observations beyond the percentile (that its count
alone would have had) the step is undecided, with the count that would decide it. A step without a
stored interval (an older file) is judged on its point estimate, and the analysis says so.

The SLO load is the highest usable step that holds *below the lowest step that breaks*: a step
that holds above a break is not trusted (latency that is not monotone in load is noise, drift or a
bimodal server) and the plan names every such step; no break is dropped.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tokenpace.core.analysis.capacity.loadpoint import LoadPoint
from tokenpace.core.stats import MIN_TAIL_SAMPLES, enough_samples

SLO_METRICS = ("ttft_ms", "tpot_ms", "e2e_ms")
HOLDS, BREAKS, UNDECIDED, LEFT_OUT = "holds", "breaks", "undecided", "left out"


def _by_load(points: Sequence[LoadPoint]) -> list[LoadPoint]:
    return sorted(points, key=lambda p: (p.offered if p.offered is not None else 0.0, p.step))


@dataclass(frozen=True, slots=True)
class StepSlo:
    verdict: str  # holds | breaks | undecided | left out
    reason: str
    point_only: bool = False  # judged on a point estimate: no interval stored


def judge_step(p: LoadPoint, slo: dict[str, float], percentile: str, max_error_rate: float) -> StepSlo:
    if not p.usable:
        return StepSlo(LEFT_OUT, ", ".join(p.left_out_reasons))
    if not p.ok or p.error_rate > max_error_rate:
        return StepSlo(BREAKS, f"errors {p.error_rate:.1%} over {max_error_rate:.0%}")
    undecided: list[str] = []
    point_only = False
    for metric in SLO_METRICS:
        limit = slo.get(metric)
        if limit is None:
            continue
        value = p.slo_pct(metric, percentile)
        if value is None:
            if metric == "tpot_ms":
                continue  # single-token outputs have no TPOT; they meet a TPOT SLO (see metrics)
            return StepSlo(BREAKS, f"no {metric[:-3].upper()} sample")
        name = f"{metric[:-3].upper()} {percentile.upper()}"
        few = _too_few_effective(p, metric, percentile)
        if few:
            undecided.append(f"{name}: {few}")
            continue
        ci = p.slo_ci(metric, percentile)
        lo, hi = ci if ci is not None else (value, value)
        point_only = point_only or ci is None
        if lo > limit:
            return StepSlo(BREAKS, f"{name} {value:.4g} ms, lower bound {lo:.4g} > {limit:g}", point_only)
        if math.isinf(hi):  # an open side: dependence left too few effective requests beyond it
            undecided.append(
                f"{name} {value:.4g} ms, interval {_span(lo, hi)}: requests moved together, too few "
                "effective ones beyond it to bound it from above; a longer step would decide"
            )
        elif hi >= limit:
            undecided.append(f"{name} {value:.4g} ms, interval {_span(lo, hi)} straddles {limit:g}")
    if undecided:
        return StepSlo(UNDECIDED, "; ".join(undecided), point_only)
    return StepSlo(HOLDS, "every upper bound under its line", point_only)


def _span(lo: float, hi: float) -> str:
    """[lo, hi] as read; a side the step cannot bound (infinite) "unbounded"."""
    left = "(unbounded" if math.isinf(lo) else f"[{lo:.4g}"
    return f"{left}, {'unbounded)' if math.isinf(hi) else f'{hi:.4g}]'}"


def _too_few_effective(p: LoadPoint, metric: str, percentile: str) -> str:
    """Why the percentile cannot be judged where its requests moved together; "" where it can."""
    eff = p.slo_effective(metric, percentile)
    q = float(percentile[1:])
    if eff is None or eff[1] <= 0 or enough_samples(eff[1], q) or not enough_samples(eff[0], q):
        return ""  # a step too short even as independent requests is judged as before
    n, n_eff = eff
    tail = min(q, 100 - q) / 100
    more = math.ceil(n * MIN_TAIL_SAMPLES / (tail * n_eff)) - n
    return (
        f"requests moved together: {n} requests worth {n_eff:.0f} independent; about {more} more "
        "requests (a longer step) would decide"
    )


@dataclass(frozen=True, slots=True)
class SloCapacity:
    slo: dict[str, float]
    percentile: str
    holds: list[bool | None]  # per step: True holds, False breaks, None undecided or left out
    step: int | None  # the usable step of highest achieved load where it holds, below any break
    load_rps: float | None
    goodput_rps: float | None  # requests/s that met the SLO at that step
    bounded: bool = False  # a usable step at a higher load broke it: the load is a ceiling
    broken_step: int | None = None  # the first such step
    basis: str = "send"  # latencies judged from the send (closed loop) or the scheduled time (open)
    verdicts: list[str] = field(default_factory=list)  # per step: holds | breaks | undecided | left out
    reasons: list[str] = field(default_factory=list)
    held_above_break: list[int] = field(default_factory=list)  # steps not trusted: a lower load broke
    undecided_above: list[int] = field(default_factory=list)  # undecided steps above the SLO load
    point_only: list[int] = field(default_factory=list)  # steps judged without an interval
    # an open loop's maximum is a lower bound: the true one lies between it and the next rate run
    lower_bound_why: str = ""
    at_most_rps: float | None = None  # that next rate (None: none was run)

    @property
    def is_lower_bound(self) -> bool:
        return self.load_rps is not None and (not self.bounded or bool(self.lower_bound_why))

    def to_dict(self) -> dict[str, Any]:
        return {
            "slo": self.slo,
            "percentile": self.percentile,
            "latency_from": self.basis,
            "rule": "holds: every upper bound of the 95% interval under its line; breaks: a lower "
            "bound over it (or errors over the limit); undecided otherwise",
            "holds": self.holds,
            "verdicts": self.verdicts,
            "reasons": self.reasons,
            "step": self.step,
            "max_load_rps": self.load_rps,
            "max_load_is_lower_bound": self.is_lower_bound,
            "lower_bound_why": self.lower_bound_why or None,
            "true_max_below_rps": self.at_most_rps,
            "goodput_rps": self.goodput_rps,
            "ceiling_reached": self.bounded,
            "broken_at_step": self.broken_step,
            "held_above_a_break": self.held_above_break,
            "undecided_above": self.undecided_above,
            "judged_on_point_estimates": self.point_only,
        }


def slo_capacity(
    pts: list[LoadPoint], slo: dict[str, float], percentile: str, max_error_rate: float
) -> SloCapacity:
    judged = [judge_step(p, slo, percentile, max_error_rate) for p in pts]
    verdict = {p.step: j.verdict for p, j in zip(pts, judged, strict=True)}
    ordered = _by_load([p for p in pts if p.usable])
    first_break = next((p for p in ordered if verdict[p.step] == BREAKS), None)
    below = ordered if first_break is None else ordered[: ordered.index(first_break)]
    held = [p for p in below if verdict[p.step] == HOLDS]
    top = max(held, key=lambda p: p.achieved_rps, default=None)
    above_top = ordered[ordered.index(top) + 1 :] if top is not None else ordered
    not_trusted = [p.step for p in ordered if first_break and verdict[p.step] == HOLDS and p not in below]
    undecided = [p.step for p in above_top if verdict[p.step] == UNDECIDED and p in below]
    why, at_most = open_loop_bound(
        top, pts, {p.step: j.reason for p, j in zip(pts, judged, strict=True)}, verdict
    )
    return SloCapacity(
        dict(slo),
        percentile,
        [{HOLDS: True, BREAKS: False}.get(j.verdict) for j in judged],
        top.step if top else None,
        top.achieved_rps if top else None,
        top.goodput if top else None,
        bounded=top is None or first_break is not None,
        broken_step=first_break.step if first_break else None,
        basis="scheduled" if any(p.slo_basis == "scheduled" for p in ordered) else "send",
        verdicts=[j.verdict for j in judged],
        reasons=[j.reason for j in judged],
        held_above_break=not_trusted,
        undecided_above=undecided,
        point_only=[p.step for p, j in zip(pts, judged, strict=True) if j.point_only],
        lower_bound_why=why,
        at_most_rps=at_most,
    )


def open_loop_bound(
    top: LoadPoint | None, pts: Sequence[LoadPoint], reasons: dict[int, str], verdict: dict[int, str]
) -> tuple[str, float | None]:
    """Why an open loop's highest rate that held is a lower bound of the true maximum, and the next
    rate run above it (None: none). Rates are tried in steps: the true maximum lies between the rate
    that held and the next one, whatever that one's fate ("" for a closed loop)."""
    if top is None or top.mode != "open_loop" or top.offered is None:
        return "", None
    higher = [p for p in pts if p.mode == top.mode and p.offered is not None and p.offered > top.offered]
    if not higher:
        return f"no rate above {top.offered:.3g} req/s was run: the true maximum lies above it", None
    nxt = min(higher, key=lambda p: (p.offered or 0.0, p.step))
    why = reasons.get(nxt.step, "")
    fate = {BREAKS: "broke it", UNDECIDED: "is undecided", LEFT_OUT: "is left out"}.get(
        verdict.get(nxt.step, ""), "was not sustained" if why else "did no better"
    )
    return (
        f"rates are run in steps: the true maximum lies between {top.offered:.3g} and {nxt.offered:.3g} "
        f"req/s (step {nxt.step} {fate}{': ' + why if why else ''})"
    ), nxt.offered


def slo_warnings(s: SloCapacity) -> list[str]:
    """What the SLO figure cannot tell, in words for the plan."""
    out = []
    if s.held_above_break and s.broken_step is not None:
        steps = ", ".join(map(str, s.held_above_break))
        out.append(
            f"the SLO broke at step {s.broken_step} but held at step(s) {steps}, at higher loads: latency "
            "is not monotone in load (noise, drift or a bimodal server); those steps are not trusted"
        )
    if s.undecided_above:
        steps = ", ".join(map(str, s.undecided_above))
        out.append(
            f"the SLO is undecided at step(s) {steps} (the interval straddles the line): more requests "
            "per step would decide them; the SLO load stays below them"
        )
    if s.point_only:
        steps = ", ".join(map(str, s.point_only))
        out.append(f"step(s) {steps} carry no interval (an older file): judged on point estimates")
    return out
