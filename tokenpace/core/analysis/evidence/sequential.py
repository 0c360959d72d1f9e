"""Repeats only while undecided: an always-valid (anytime) interval for the change of one percentile
between two sides of runs, so that runs can be added one at a time and the gate looked at after
each, stopping as soon as it decides, without raising its false-alarm rate. Pure.

Model: run i of side s gives y = log(percentile) ~ N(mu_s, sigma_s^2), sigma_s^2 = tau^2 + se_s^2
(the noise between runs the library taught, shrunk toward its prior: ``runnoise``; and the run's
own sampling variance). D = mean(y_b) - mean(y_a) has variance v = sigma_a^2/k_a + sigma_b^2/k_b,
information I = 1/v. The score S = I (D - delta) is a Gaussian martingale in information time,
whichever side the rule chose to rerun next (the choice reads only the past). Robbins' normal
mixture (a mixture martingale; Ville's inequality) gives, at every look at once,

    P( exists a look: |S| >= sqrt((I + r) log((I + r) / (r alpha^2))) ) <= alpha

so delta lies in D +- sqrt((I + r) log((I + r) / (r alpha^2))) / I at every look with probability
1 - alpha: stopping the first time that interval clears the threshold keeps the false-alarm rate at
most alpha under this optional stopping. ``r``, the mixture's precision in information units, is
fixed before the first run: the information of two runs a side at the noise used, where the
interval is tightest. The guarantee holds when sigma is at most the value used; it is taken from the
library and the prior before the sequence starts, never from the sequence's own runs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

REGRESSED, PASS, UNDECIDED = "regressed", "pass", "undecided"
PLANNED_RUNS = 2  # runs a side where the interval is tightest (sets r)


def mixture_half_width(info: float, r: float, alpha: float) -> float:
    """Half-width of the normal-mixture confidence sequence at information ``info`` (1 / variance)."""
    if info <= 0:
        return math.inf
    return math.sqrt((info + r) * math.log((info + r) / (r * alpha * alpha))) / info


def mixture_precision(var_a: float, var_b: float, runs: int = PLANNED_RUNS) -> float:
    """r: the information of ``runs`` runs a side at per-run variances ``var_a``, ``var_b``."""
    return 1.0 / (var_a / runs + var_b / runs)


@dataclass(frozen=True, slots=True)
class Look:
    runs_a: int
    runs_b: int
    rel: float  # B/A - 1 of the sides' geometric mean levels
    rel_lo: float  # the always-valid interval
    rel_hi: float
    outcome: str  # regressed | pass | undecided
    next_side: str | None  # "a" or "b": the run that would narrow the interval most; None if decided


def look(
    a_values: Sequence[float],
    b_values: Sequence[float],
    var_a: float,
    var_b: float,
    limit: float,
    alpha: float = 0.05,
    higher_is_better: bool = False,
    r: float | None = None,
    rerun: str = "ab",
) -> Look:
    """The gate after the runs so far (each side's percentiles, > 0): regressed when the whole
    interval lies beyond ``limit`` on the worse side, pass when it lies short of it; ``rerun``: the
    sides that can still be run ("b" when the baseline is only stored)."""
    if not a_values or not b_values or min(*a_values, *b_values) <= 0:
        raise ValueError("each side needs at least one run with a positive value")
    ka, kb = len(a_values), len(b_values)
    d = sum(math.log(x) for x in b_values) / kb - sum(math.log(x) for x in a_values) / ka
    info = 1.0 / (var_a / ka + var_b / kb)
    half = mixture_half_width(info, r if r is not None else mixture_precision(var_a, var_b), alpha)
    lo, hi = _expm1(d - half), _expm1(d + half)
    near, far = (-hi, -lo) if higher_is_better else (lo, hi)  # the worse side's view
    if near > limit:
        outcome = REGRESSED
    elif far < limit:
        outcome = PASS
    else:
        outcome = UNDECIDED
    side = None
    if outcome == UNDECIDED and rerun:
        gain = {"a": var_a / (ka * (ka + 1)), "b": var_b / (kb * (kb + 1))}
        side = max((s for s in rerun if s in gain), key=lambda s: gain[s])
    return Look(ka, kb, math.exp(d) - 1, lo, hi, outcome, side)


@dataclass(frozen=True, slots=True)
class SideNeeds:
    """What would decide an undecided look, side by side (None: not within the cap of runs)."""

    candidate: int | None  # more candidate runs, the baseline as it is
    baseline: int | None  # more baseline runs, the candidate side at its budget

    @property
    def limiting(self) -> str | None:
        """ "baseline" when candidate runs alone cannot decide but baseline runs can; "both" when
        neither can (a change too close to the threshold); None when candidate runs can."""
        if self.candidate is not None:
            return None
        return "baseline" if self.baseline is not None else "both"


def side_needs(
    lk: Look,
    var_a: float,
    var_b: float,
    limit: float,
    alpha: float = 0.05,
    higher_is_better: bool = False,
    r: float | None = None,
    candidate_budget: int = 0,
    cap: int = 50,
) -> SideNeeds:
    """For each side, the fewest more runs after which the always-valid interval would clear the
    threshold if the change is what the runs measured: candidate runs with the baseline as it is,
    and baseline runs with the candidate side at ``candidate_budget`` runs (or as it is). This is
    advice on what to run, not a verdict. A side's term of the variance (var / runs) stays whatever
    the other side does: where the baseline's term alone keeps the interval wider than the change's
    distance from the threshold, no number of candidate runs decides."""
    if lk.outcome != UNDECIDED:
        return SideNeeds(0, 0)
    edge = math.log(1 - limit) if higher_is_better else math.log(1 + limit)
    dist = abs(math.log1p(lk.rel) - edge)
    r = r if r is not None else mixture_precision(var_a, var_b)
    kb = max(lk.runs_b, candidate_budget)

    def fewest(var_more: float, k_more: int, fixed: float) -> int | None:
        for extra in range(1, cap - k_more + 1):
            info = 1.0 / (fixed + var_more / (k_more + extra))
            if mixture_half_width(info, r, alpha) < dist:
                return extra
        return None

    return SideNeeds(fewest(var_b, lk.runs_b, var_a / lk.runs_a), fewest(var_a, lk.runs_a, var_b / kb))


def _expm1(x: float) -> float:
    """exp(x) - 1, infinite past what a float holds (an interval too wide to bound)."""
    return math.expm1(x) if x < 700 else math.inf
