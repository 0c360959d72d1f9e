"""Noise between runs: how much a metric's percentile moves between runs of an unchanged server,
beyond the sampling noise between requests inside each run. Pure.

Model: run i of a side measures x_i = L * exp(d_i + e_i), where d_i is the run's own level (SD
``rel_sd`` between runs: batch mix, caches, a busy host) and e_i its sampling error (the bootstrap
SE of the percentile inside the run). Repeated runs under the same conditions (``bench --repeat K``)
estimate rel_sd^2 = var(log x_i) - mean(se_i^2), with K - 1 degrees of freedom; several groups pool
by their degrees of freedom. A group is a repeat group (``bench --repeat K``) or any runs the library
holds of the same test (conditions and labels alike): every stored run is evidence.

The pooled value is shrunk toward a stated prior: half the assumed value below (the typical noise
reruns showed), worth ``PRIOR_DF`` degree of freedom (a scaled inverse chi-square prior on
rel_sd^2): rel_sd^2 = (PRIOR_DF * prior^2 + df * pooled) / (PRIOR_DF + df), with PRIOR_DF + df
degrees of freedom. A group's own estimate is floored at zero (sampling noise larger than the runs'
spread), but the shrunk value never is: a handful of runs cannot claim no noise at all. Without any
estimate the prior is used, and said.

A gate does not use that estimate itself but its upper confidence bound (``upper_bound``: the
one-sided chi-square bound of an SD from its degrees of freedom), so that a few quiet runs cannot
promise a quiet host; ``evidence/gate_noise`` adds the host's conditions and the current runs.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np

# Assumed between-run SD when nothing was learned: at or above what reruns of an unchanged server
# showed (TPOT P50 2.1 %, ITL P95 about 10 %), so the gate stays quiet rather than cry wolf.
ASSUMED_CENTRE_SD = 0.05  # percentiles up to P50
ASSUMED_TAIL_SD = 0.10  # percentiles above P50
# The prior that learned noise is shrunk toward: a typical value (half the assumed one: what reruns
# of an unchanged server showed), worth one run's degree of freedom. With nothing learned, the
# conservative assumed value itself applies.
PRIOR_DF = 1.0
PRIOR_SHARE = 0.5
POWER = 0.90  # "detectable": the true change called with this probability
MAX_RUNS_ADVISED = 50  # beyond this many runs a side, the change is too close to the threshold
NOISE_CONFIDENCE = 0.95  # the one-sided level of the upper bound a gate uses


@dataclass(frozen=True, slots=True)
class RunNoise:
    """Between-run relative SD of one metric percentile (``tpot.p95``) and where it comes from."""

    key: str
    rel_sd: float
    df: float  # degrees of freedom of the estimate; inf when assumed
    groups: int  # repeat groups it rests on (0: assumed)
    runs: int
    concurrent: bool = False  # the sides ran interleaved over one window: no noise between runs
    raw_sd: float | None = None  # the pooled estimate before shrinkage toward the prior
    point_sd: float | None = None  # the shrunk estimate that was bounded (None: not bounded)
    bound_sd: float | None = None  # its upper bound (``rel_sd`` unless the current runs show more)
    current_sd: float | None = None  # what the current runs' own spread shows (sides of 2+ runs)
    elsewhere_sd: float | None = None  # learned from runs of other host conditions: not counted
    host: str | None = None  # the current runs' host conditions the noise was learned under

    @property
    def assumed(self) -> bool:
        return self.groups == 0 and not self.concurrent

    @property
    def rests_on_assumption(self) -> bool:
        """Nothing measured it: no run of the library under these conditions, no current spread."""
        return self.assumed and self.current_sd is None

    def _base_sd(self) -> float:
        """The value learned (its bound) or assumed, before the current runs' spread floored it."""
        if self.assumed:
            return _assumed_sd(self.key)
        return self.bound_sd if self.bound_sd is not None else self.rel_sd

    def describe(self) -> str:
        if self.concurrent:
            return "none: both sides were measured over the same time"
        base = self._base_sd()
        if self.assumed:
            head = f"{base:.1%} assumed (no repeated runs under these conditions)"
        elif self.point_sd is not None and base <= _ucb(self.point_sd, self.df - PRIOR_DF) * (1 + 1e-9):
            head = (
                f"{base:.1%}, the {NOISE_CONFIDENCE:.0%} upper bound of the {self.point_sd:.1%} that "
                f"{self.runs} runs in {self.groups} group(s) of the library showed "
                f"({self.df - PRIOR_DF:g} degrees of freedom)"
            )
        elif self.point_sd is not None:  # the prior held it above that bound
            head = (
                f"{base:.1%} from {self.runs} runs in {self.groups} group(s) of the library, shrunk "
                f"toward the {_prior_sd(self.key):.1%} prior worth {PRIOR_DF:g} run(s) (above the "
                f"{NOISE_CONFIDENCE:.0%} upper bound of the {self.point_sd:.1%} they showed)"
            )
        else:
            raw = f"; {self.raw_sd:.1%} before" if self.raw_sd is not None else ""
            head = (
                f"{base:.1%} from {self.runs} runs in {self.groups} group(s) of the library, shrunk "
                f"toward the {_prior_sd(self.key):.0%} prior worth {PRIOR_DF:g} run(s){raw}"
            )
        return head + "".join(f"; {n}" for n in self.notes())

    def notes(self) -> list[str]:
        """What the host's conditions and the current runs changed."""
        out = []
        if self.elsewhere_sd is not None:
            out.append(
                f"noise learned under other host conditions ({self.elsewhere_sd:.1%}) not counted: "
                f"these runs were measured on a {self.host or 'not recorded'} host"
            )
        base = self._base_sd()
        if self.current_sd is not None and self.current_sd > base:
            how = "assumed" if self.assumed else "learned"
            out.append(
                f"noise {how} ({base:.1%}) below what the current runs show ({self.current_sd:.1%}): "
                f"using {self.rel_sd:.1%}"
            )
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "rel_sd": self.rel_sd,
            "df": None if math.isinf(self.df) else self.df,
            "groups": self.groups,
            "runs": self.runs,
            "assumed": self.assumed,
            "concurrent": self.concurrent,
            "raw_rel_sd": self.raw_sd,
            "point_rel_sd": self.point_sd,
            "upper_bound": self.bound_sd,
            "upper_bound_level": NOISE_CONFIDENCE if self.point_sd is not None else None,
            "current_rel_sd": self.current_sd,
            "other_host_rel_sd": self.elsewhere_sd,
            "host": self.host,
            "notes": self.notes(),
            "prior": None
            if self.assumed or self.concurrent
            else {"rel_sd": _prior_sd(self.key), "df": PRIOR_DF},
        }


@dataclass(frozen=True, slots=True)
class GroupNoise:
    """One repeat group's estimate for one key: K runs, the variance beyond sampling error."""

    key: str
    runs: int
    rel_var: float  # between-run variance of log x, sampling variance removed (>= 0)
    within_se: float  # mean relative sampling SE of one run (for display)
    level: float  # mean of the runs' values
    host: str | None = None  # the host conditions its runs were measured under (None: not recorded)


def noise_key(metric: str, q: float) -> str:
    return f"{metric}.p{q:g}"


def _assumed_sd(key: str) -> float:
    q = float(key.rsplit(".p", 1)[1])
    return ASSUMED_CENTRE_SD if q <= 50 else ASSUMED_TAIL_SD


def _prior_sd(key: str) -> float:
    return PRIOR_SHARE * _assumed_sd(key)


def assumed(key: str) -> RunNoise:
    return RunNoise(key, _assumed_sd(key), math.inf, 0, 0)


def concurrent(key: str) -> RunNoise:
    """Sides measured over the same window (the gateway's arms): what moves one run moves both."""
    return RunNoise(key, 0.0, math.inf, 0, 0, concurrent=True)


def group_noise(
    key: str, values: Sequence[float] | np.ndarray, ses: Sequence[float] | np.ndarray
) -> GroupNoise | None:
    """The estimate from K >= 2 runs' values and their sampling SEs (same unit); None if unusable."""
    x = np.asarray(values, dtype=np.float64)
    se = np.asarray(ses, dtype=np.float64)
    if len(x) < 2 or not np.all(x > 0) or not np.all(np.isfinite(se)):
        return None
    rel_se = se / x
    total = float(np.var(np.log(x), ddof=1))
    within = float(np.mean(rel_se**2))
    return GroupNoise(key, len(x), max(0.0, total - within), float(np.mean(rel_se)), float(x.mean()))


def pool(key: str, groups: Sequence[GroupNoise]) -> RunNoise:
    """Pooled by degrees of freedom; the assumed value when no group has two runs."""
    usable = [g for g in groups if g.key == key and g.runs >= 2]
    df = sum(g.runs - 1 for g in usable)
    if df == 0:
        return assumed(key)
    var = sum((g.runs - 1) * g.rel_var for g in usable) / df
    prior = _prior_sd(key) ** 2
    shrunk = (PRIOR_DF * prior + df * var) / (PRIOR_DF + df)
    return RunNoise(
        key, math.sqrt(shrunk), float(df + PRIOR_DF), len(usable), sum(g.runs for g in usable),
        raw_sd=math.sqrt(var),
    )  # fmt: skip


def upper_bound(noise: RunNoise, confidence: float = NOISE_CONFIDENCE) -> RunNoise:
    """``noise`` raised to the one-sided upper confidence bound of the SD its runs showed:
    raw_sd * sqrt(df / chi2_{1-confidence}(df)) on the runs' own degrees of freedom (the prior's
    pull toward a quiet host left out, so the bound covers the truth at ``confidence``), and never
    below the shrunk value (a handful of runs cannot claim no noise). An assumed or concurrent value
    (no degrees of freedom) is kept."""
    df = noise.df - PRIOR_DF
    if noise.assumed or noise.concurrent or noise.raw_sd is None or math.isinf(df) or df <= 0:
        return noise
    bound = max(_ucb(noise.raw_sd, df, confidence), noise.rel_sd)
    return dataclasses.replace(noise, rel_sd=bound, point_sd=noise.raw_sd, bound_sd=bound)


def _ucb(sd: float, df: float, confidence: float = NOISE_CONFIDENCE) -> float:
    return sd * math.sqrt(df / chi2_quantile(1 - confidence, df))


def raw_pool(key: str, groups: Sequence[GroupNoise]) -> float | None:
    """The groups' pooled SD (no prior, no bound): what they show; None without two runs in one."""
    usable = [g for g in groups if g.key == key and g.runs >= 2]
    df = sum(g.runs - 1 for g in usable)
    return math.sqrt(sum((g.runs - 1) * g.rel_var for g in usable) / df) if df else None


def _gamma_p(a: float, x: float) -> float:
    """The regularized lower incomplete gamma function P(a, x): its series below a + 1, else the
    continued fraction of Q (Numerical Recipes' gammp)."""
    if x <= 0:
        return 0.0
    log_front = a * math.log(x) - x - math.lgamma(a)
    if x < a + 1:
        term = total = 1.0 / a
        n = a
        for _ in range(500):
            n += 1
            term *= x / n
            total += term
            if abs(term) < abs(total) * 1e-14:
                break
        return total * math.exp(log_front)
    tiny = 1e-300
    b, c, d = x + 1 - a, 1 / tiny, 1 / (x + 1 - a)
    h = d
    for i in range(1, 500):
        an = -i * (i - a)
        b += 2
        d = an * d + b
        d = tiny if abs(d) < tiny else d
        c = b + an / c
        c = tiny if abs(c) < tiny else c
        d = 1 / d
        h *= d * c
        if abs(d * c - 1) < 1e-14:
            break
    return 1 - math.exp(log_front) * h


def chi2_quantile(p: float, df: float) -> float:
    """The chi-square quantile of probability ``p`` with ``df`` (> 0, any real) degrees of freedom,
    by bisection on its distribution function (numpy has none)."""
    lo, hi = 0.0, max(1.0, df)
    while _gamma_p(df / 2, hi / 2) < p:
        hi *= 2
    for _ in range(100):
        mid = (lo + hi) / 2
        if _gamma_p(df / 2, mid / 2) < p:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def t_quantile(p: float, df: float) -> float:
    """Student's t quantile (numpy has none): exact for 1 and 2 degrees of freedom, else the
    Cornish-Fisher expansion around the normal quantile (within 0.5 % from 3 degrees up)."""
    z = NormalDist().inv_cdf(p)
    if math.isinf(df) or df > 1e6:
        return z
    if df <= 1:
        return math.tan(math.pi * (p - 0.5))
    if df <= 2:
        return (2 * p - 1) / math.sqrt(2 * p * (1 - p))
    g1 = (z**3 + z) / 4
    g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96
    g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384
    g4 = (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160
    return z + g1 / df + g2 / df**2 + g3 / df**3 + g4 / df**4


def t_cdf(t: float, df: float) -> float:
    """Student's t distribution function by bisection on ``t_quantile`` (enough for a p-value)."""
    if math.isinf(df) or df > 1e6:
        return NormalDist().cdf(t)
    lo, hi = 1e-12, 1 - 1e-12
    for _ in range(60):
        mid = (lo + hi) / 2
        if t_quantile(mid, df) < t:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def satterthwaite_df(run_part: float, run_df: float, total: float) -> float:
    """Degrees of freedom of a variance whose ``run_part`` was estimated with ``run_df`` and the rest
    is known well (bootstrap): Welch-Satterthwaite."""
    if run_part <= 0 or math.isinf(run_df):
        return math.inf
    return max(1.0, total**2 / (run_part**2 / run_df))
