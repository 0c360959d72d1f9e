"""The change of one percentile between two sides of one or more runs each, with the noise between
requests (bootstrap inside each run) and between runs (``runnoise``) in its interval. Pure.

Each side's level is the mean of its runs' percentiles; the change B/A - 1 is judged on the log
scale, where its variance is, per side, (rel_sd^2 + mean relative sampling variance) / runs.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from tokenpace.core.analysis.evidence.bootstrap import resample_percentiles, resamples_for
from tokenpace.core.analysis.evidence.dependence import dependence
from tokenpace.core.analysis.evidence.runnoise import (
    MAX_RUNS_ADVISED,
    POWER,
    RunNoise,
    satterthwaite_df,
    t_cdf,
    t_quantile,
)
from tokenpace.core.analysis.evidence.samples import Samples
from tokenpace.core.stats import enough_samples, near_constant, open_sides


@dataclass(slots=True)
class SideLevels:
    """Per run (rows) and percentile (columns): the run's percentile, its bootstrap SE (in blocks of
    time where requests moved together) and its effective sample size."""

    values: np.ndarray
    ses: np.ndarray
    counts: list[int]
    n_effs: np.ndarray | None = None
    by: list[str] = dataclasses.field(default_factory=list)  # per run: what its bootstrap resampled
    identified: np.ndarray | None = None  # per run and percentile: the run identified its dependence
    drifts: np.ndarray | None = None  # per run and percentile: |log| of its second half over its first
    clusters: list[int] = dataclasses.field(default_factory=list)  # per run: users or sessions (by them)
    clusters_needed: np.ndarray | None = None  # per run and percentile: about how many would decide
    tied: np.ndarray | None = None  # per run and percentile: it sits on a near-constant level

    def drift(self, column: int) -> float:
        """The largest drift of one percentile between a run's halves, over the side's runs (log)."""
        return 0.0 if self.drifts is None else float(np.max(self.drifts[:, column]))

    def unidentified(self, column: int) -> bool:
        """Every run of the side left the percentile's dependence unidentified (see dependence)."""
        return self.identified is not None and not bool(np.any(self.identified[:, column]))

    @property
    def resampled_by(self) -> str:
        """What the side's runs were resampled by ("time blocks", "user", ...; several: joined)."""
        return ", ".join(dict.fromkeys(self.by)) or "requests"

    def n_eff(self, column: int) -> float:
        """The side's effective sample size at one percentile: its runs' together."""
        if self.n_effs is None:
            return float(sum(self.counts))
        return float(np.sum(self.n_effs[:, column]))

    @property
    def runs(self) -> int:
        return len(self.counts)

    def open_sides(self, column: int, q: float, alpha: float) -> tuple[bool, bool]:
        """Whether the side's dependence leaves percentile ``q`` (0-100) unbounded below, above, at
        a two-sided ``alpha``: no value its runs hold bounds it there, though their count would
        (``core.stats.open_sides``); never where every run's percentile sits on a near-constant
        level (its ranks bound it)."""
        if self.tied is not None and bool(np.all(self.tied[:, column])):
            return False, False
        return open_sides(float(sum(self.counts)), self.n_eff(column), q / 100, alpha / 2)


def side_levels(
    runs: Sequence[Samples], qs: Sequence[float], resamples: int, rng: np.random.Generator, floor: bool = True
) -> SideLevels:
    """The percentiles ``qs`` of every run of a side with their sampling SEs; every run non-empty.
    ``floor``: the spread floored at the order-statistic interval's at n_eff (``dependence``); not
    where both sides were measured interleaved in one window, whose stalls and queues they share --
    but kept where a run is resampled by user or session: an arm's users are its own."""
    values, ses, n_effs, by, known, clusters, needs = [], [], [], [], [], [], []
    drifts = [half_drift(s, qs) for s in runs]
    tied = [[near_constant(np.sort(s.values), q) for q in qs] for s in runs]
    for s in runs:
        values.append(np.percentile(s.values, qs))
        plan = dependence(s, qs)
        shared = not floor and plan.by in ("requests", "time blocks")
        plan = dataclasses.replace(plan, floor_sd=np.zeros(len(qs))) if shared else plan
        boot = resample_percentiles(s, qs, resamples_for(s.n, resamples), rng, plan)
        ses.append(np.nanstd(boot, axis=0, ddof=1) if len(boot) > 1 else np.full(len(qs), np.nan))
        n_effs.append(np.minimum(plan.n_eff, s.n))
        by.append(plan.by)
        clusters.append(plan.clusters)
        needs.append(
            plan.clusters_needed if plan.clusters_needed is not None else np.zeros(len(qs), np.int64)
        )
        known.append(plan.identified if plan.identified is not None else np.ones(len(qs), dtype=bool))
    counts = [s.n for s in runs]
    return SideLevels(
        np.array(values), np.array(ses), counts, np.array(n_effs), by, np.array(known), np.array(drifts),
        clusters, np.array(needs), np.array(tied, dtype=bool),
    )  # fmt: skip


def cluster_caveat(q: float, column: int, *sides: SideLevels) -> str | None:
    """Why one percentile's verdict cannot rest on a single run resampled by user or session: too
    few of them for the effective requests it needs (more requests of the same users do not help).
    None when no side is such a run."""
    for name, side in zip("AB", sides, strict=True):
        n, n_eff = float(sum(side.counts)), side.n_eff(column)
        if side.runs != 1 or side.by[0] in ("requests", "time blocks") or enough_samples(n_eff, q):
            continue
        kind = "users or sessions" if " or " in side.by[0] else f"{side.by[0]}s"
        need = int(side.clusters_needed[0, column]) if side.clusters_needed is not None else 0
        would = f"about {need} {kind}" if need else f"many more {kind}"
        return (
            f"side {name}'s requests come from {side.clusters[0]} {kind} whose own latencies differ: "
            f"too few {kind} to measure their effect at p{q:g} ({n_eff:.0f} effective requests of "
            f"{n:.0f}); {would} would decide"
        )
    return None


def half_drift(s: Samples, qs: Sequence[float]) -> np.ndarray:
    """Per percentile: |log(P_q of the run's second half / P_q of its first)|, halves in send order;
    infinite where a half is empty or not positive (no drift measured: none to rely on)."""
    groups = s.in_send_order()
    mid = len(groups) // 2
    if mid < 1:
        return np.full(len(qs), np.inf)
    first = np.percentile(np.concatenate(groups[:mid]), qs)
    second = np.percentile(np.concatenate(groups[mid:]), qs)
    ok = (first > 0) & (second > 0)
    out: np.ndarray = np.where(
        ok, np.abs(np.log(np.where(ok, second, 1.0) / np.where(ok, first, 1.0))), np.inf
    )
    return out


@dataclass(frozen=True, slots=True)
class Change:
    a: float  # side A's level (mean of its runs' percentiles)
    b: float
    rel: float | None  # B/A - 1
    rel_lo: float | None
    rel_hi: float | None
    p_value: float | None  # two-sided, of "no change"
    se_log: float  # SE of log(B/A)
    df: float
    detectable: float | None  # smallest worsening beyond the threshold called with POWER
    runs_needed: int | None  # runs a side deciding a truth at the interval's far end (None: > 50)
    per_run_var: float = 0.0  # relative variance of one run's value: between-run plus sampling
    alpha: float = 0.05
    runs: int = 1  # runs of the side with fewer: what runs_needed must exceed to add any evidence

    @property
    def diff(self) -> float:
        return self.b - self.a

    @property
    def ci(self) -> tuple[float, float] | None:
        if self.rel_lo is None or self.rel_hi is None:
            return None
        return (self.a * self.rel_lo, self.a * self.rel_hi)


def _side_var(values: np.ndarray, ses: np.ndarray) -> tuple[float, float]:
    """Mean relative sampling variance of one run, and the runs' mean level."""
    rel = np.where(values > 0, ses / np.where(values > 0, values, 1.0), np.nan)
    within = float(np.nanmean(rel**2)) if np.isfinite(rel).any() else 0.0
    return within, float(np.mean(values))


def change(
    a_values: np.ndarray,
    a_ses: np.ndarray,
    b_values: np.ndarray,
    b_ses: np.ndarray,
    noise: RunNoise,
    alpha: float,
    threshold: float,
    higher_is_better: bool,
    one_sided: bool = False,
) -> Change:
    """The change of one percentile, B against A, with run noise ``noise`` and the practical
    ``threshold`` (relative) that ``detectable`` and ``runs_needed`` refer to; ``one_sided``: only
    the worse side's threshold counts (a gate), else both (compare)."""
    within_a, level_a = _side_var(a_values, a_ses)
    within_b, level_b = _side_var(b_values, b_ses)
    k_a, k_b = len(a_values), len(b_values)
    tau2 = noise.rel_sd**2
    run_part = tau2 * (1 / k_a + 1 / k_b)
    var = run_part + within_a / k_a + within_b / k_b
    # The estimate of run noise came with its sampling part (var(log x) = tau^2 + se^2): all of a
    # run's variance is as uncertain as that estimate, also when tau^2 came out as zero. An upper
    # bound (what a gate uses) already holds that uncertainty: it is used as known.
    if noise.point_sd is not None:
        df = math.inf
    elif noise.assumed:
        df = satterthwaite_df(run_part, noise.df, var)
    else:
        df = satterthwaite_df(var, noise.df, var)
    se = math.sqrt(var)
    if level_a <= 0 or level_b <= 0:
        return Change(level_a, level_b, None, None, None, None, se, df, None, None)
    log_r = math.log(level_b / level_a)
    t = t_quantile(1 - alpha / 2, df)
    lo, hi = math.exp(log_r - t * se) - 1, math.exp(log_r + t * se) - 1
    p = 2 * (1 - t_cdf(abs(log_r) / se, df)) if se > 0 else (0.0 if log_r else 1.0)
    base = Change(level_a, level_b, level_b / level_a - 1, lo, hi, p, se, df, None, None)
    base = dataclasses.replace(
        base, per_run_var=tau2 + (within_a + within_b) / 2, alpha=alpha, runs=min(k_a, k_b)
    )
    return against(base, threshold, higher_is_better, one_sided)


def open_change(ch: Change, a_open: tuple[bool, bool], b_open: tuple[bool, bool]) -> Change:
    """``ch`` with what the sides cannot bound left open (``SideLevels.open_sides``: below, above):
    B unbounded above or A below leaves B/A - 1 unbounded above (inf); A above or B below, below
    (-100 %). No count of runs is advised for it: the runs are too short to bound the percentile."""
    if ch.rel_lo is None or ch.rel_hi is None:
        return ch
    hi = math.inf if b_open[1] or a_open[0] else ch.rel_hi
    lo = -1.0 if a_open[1] or b_open[0] else ch.rel_lo
    if (lo, hi) == (ch.rel_lo, ch.rel_hi):
        return ch
    return dataclasses.replace(ch, rel_lo=lo, rel_hi=hi, runs_needed=None)


def is_open(ch: Change) -> bool:
    """Whether a side of the change's interval is open (``open_change``)."""
    return ch.rel_lo is not None and ch.rel_hi is not None and (ch.rel_lo <= -1 or math.isinf(ch.rel_hi))


def against(ch: Change, threshold: float, higher_is_better: bool, one_sided: bool) -> Change:
    """``ch`` with ``detectable`` and ``runs_needed`` for this threshold."""
    if ch.rel is None or ch.rel_lo is None or ch.rel_hi is None:
        return ch
    t = t_quantile(1 - ch.alpha / 2, ch.df)
    reach = (t + NormalDist().inv_cdf(POWER)) * ch.se_log
    m = min(threshold, 0.99)
    if higher_is_better:
        detectable = 1 - math.exp(math.log(1 - m) - reach)
    else:
        detectable = math.exp(math.log(1 + m) + reach) - 1
    bounds = ((-m,) if higher_is_better else (m,)) if one_sided else (m, -m)
    log_r = math.log(1 + ch.rel)
    needed = None if is_open(ch) else _runs_needed(log_r, ch.rel_lo, ch.rel_hi, bounds, ch.per_run_var, t)
    if needed:  # more than it has: those runs left it undecided
        needed = max(needed, ch.runs + 1)
        needed = needed if needed <= MAX_RUNS_ADVISED else None
    return dataclasses.replace(ch, detectable=detectable, runs_needed=needed)


def _runs_needed(
    log_r: float, lo: float, hi: float, bounds: tuple[float, ...], per_run_var: float, t: float
) -> int | None:
    """Runs a side (both alike) that would put the interval clear of the threshold it now holds if
    the truth lies where the interval reaches farthest from that threshold (read from the interval,
    never from the point estimate: one run's estimate can sit anywhere in it); 0 when already
    decided, None when even that would take more than ``MAX_RUNS_ADVISED``."""
    held = [b for b in bounds if lo <= b <= hi]
    if not held:
        return 0
    ends = (math.log(1 + lo), math.log(1 + hi))
    dist = min(max(abs(e - math.log(1 + b)) for e in ends) for b in held)
    if dist <= 0:
        return None
    k = math.ceil(2 * per_run_var * t * t / dist**2)
    return max(2, k) if k <= MAX_RUNS_ADVISED else None
