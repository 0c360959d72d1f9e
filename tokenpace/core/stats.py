"""Distribution statistics: percentiles with sample counts and confidence intervals. Pure.

Requests sent close in time move together (a queue, a host stall), so a run of n requests holds
fewer independent observations about a percentile. ``design_effect`` measures how many fewer, from
the serial correlation of the indicator "at or under the percentile" in send order: the sample
percentile's variance is q(1-q)/n times tau = 1 + 2 sum_k rho_k (the integrated autocorrelation
time), so the run is worth n_eff = n / tau independent requests. Sums run over Sokal's automatic
window (the first lag M with M >= 4 tau(M)), each lag over its own pairs, and tau is corrected for
the bias of a mean estimated from the same series (a factor 1 / (1 - 2M/n)); a tau within two
standard errors of 1 is taken as 1 (independent); otherwise tau is raised by (t/z)^2, t the 97.5 %
quantile at the estimate's degrees of freedom 2n / (4M + 2): n_eff is a conservative count.

What decides the interval is the dependence at the TRUE percentile, which may lie anywhere in the
interval: a run whose few stall episodes sit just past its own P95 shows little dependence at that
cut and much at the next. So the design effect of a percentile is the largest tau over cut levels
spanning its 99 % interval at the n_eff found so far, repeated until it stops growing
(``band_correlation``). A cut whose value ties with the percentile's own (within TIE_RESOLUTION)
is no other level: on near-constant latencies it would measure the jitter's drift, not latency.

Requests of one user or session may move together instead: ``evidence.clusters`` measures that.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any

import numpy as np

PERCENTILES = (50, 90, 95, 99)

# A percentile rests on too few samples when fewer than this many observations lie beyond it
# (P99 of 50 requests has half an observation beyond it: it is just the maximum, i.e. noise).
MIN_TAIL_SAMPLES = 5

# Up to this many samples the order-statistic interval uses the exact binomial distribution; past
# it, the normal approximation to it (then accurate to well under one rank).
_EXACT_BINOMIAL_N = 2000

# Sokal's window constant: the serial correlation is summed up to the first lag M >= WINDOW_C tau(M).
WINDOW_C = 4.0
# A tau within this many standard errors of 1 (Sokal's variance of the estimate, tau^2 (4M+2)/n) is
# taken as 1: independent requests keep the plain intervals.
NOISE_SES = 2.0
# A series shorter than this has no serial correlation estimated (taken as independent).
MIN_SERIES = 20
# The cut levels whose dependence a percentile's design effect takes: its interval at this confidence,
# at this many evenly spaced ranks, widened at most this many times (the band grows with tau).
BAND_CONFIDENCE = 0.99
BAND_CUTS = 7
BAND_ROUNDS = 4
# A cut of the band counts as dependent only this many SEs above 1: the worst of several cuts of an
# independent series exceeds NOISE_SES more often than one cut does (Bonferroni over BAND_CUTS).
BAND_NOISE_SES = 2.7
# ... and only where its tau rests on at least this many degrees of freedom (2n / (4M + 2)): over a
# short run the window of a cut far from the percentile can run away with the whole series.
BAND_MIN_DF = 8.0
# A window longer than this share of the series means its requests moved together over much of the
# run (a trend, or waves as long as the run): the dependence is not identified by the run itself.
MAX_WINDOW_SHARE = 0.25
# Values within this share of each other are one level (a tie): no verdict resolves a difference so
# small, and a cut between them orders a timer's jitter, not latencies.
TIE_RESOLUTION = 0.005
# The neighbourhood of a percentile q whose spread says whether it sits on a tie: the percentiles
# q -/+ this many points (at most halfway to either end).
TIE_NEIGHBOURHOOD = 5.0
# A side of an interval opens (unbounded) only where dependence, not the count, leaves too few
# effective requests to bound it: n_eff at most n / OPEN_MIN_DEFF, the rank at n inside the sample.
OPEN_MIN_DEFF = 2.0


@dataclass(slots=True)
class Distribution:
    """Summary of one metric's samples (e.g. TTFT in ms)."""

    n: int
    mean: float | None = None
    std: float | None = None
    min: float | None = None
    max: float | None = None
    p50: float | None = None
    p90: float | None = None
    p95: float | None = None
    p99: float | None = None
    # a side the data cannot bound is -inf or inf (None in ``to_dict``: JSON has no infinity)
    ci95: dict[str, tuple[float, float]] = field(default_factory=dict)
    low_sample: list[str] = field(default_factory=list)  # percentiles resting on too few samples
    # effective sample size per percentile, where the samples were in send order and moved together
    n_eff: dict[str, float] = field(default_factory=dict)

    def percentile(self, name: str) -> float | None:
        value: float | None = getattr(self, name)
        return value

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {k: getattr(self, k) for k in ("n", "mean", "std", "min", "max")}
        out |= {f"p{p}": getattr(self, f"p{p}") for p in PERCENTILES}
        out["ci95"] = {k: [v if math.isfinite(v) else None for v in ci] for k, ci in self.ci95.items()}
        out["low_sample"] = list(self.low_sample)
        out["n_eff"] = dict(self.n_eff)
        return out


def ci_from_json(ci: Sequence[float | None] | None) -> tuple[float, float] | None:
    """An interval as stored (``to_dict``), a None side unbounded; None where there is none."""
    if not ci or len(ci) != 2:
        return None
    return (-math.inf if ci[0] is None else float(ci[0])), (math.inf if ci[1] is None else float(ci[1]))


def robust_sd(values: Sequence[float] | np.ndarray) -> float:
    """A standard deviation a few stalls cannot inflate: 1.4826 x the median absolute deviation
    (the normal's sd where the data are normal)."""
    arr = np.asarray(values, dtype=float)
    return 1.4826 * float(np.median(np.abs(arr - np.median(arr))))


def enough_samples(n: float, percentile: float) -> bool:
    """True when at least MIN_TAIL_SAMPLES observations lie beyond the percentile."""
    tail = min(percentile, 100 - percentile) / 100
    return n * tail >= MIN_TAIL_SAMPLES


def samples_needed(percentile: float) -> int:
    """The fewest samples with MIN_TAIL_SAMPLES beyond the percentile (P95: 100, P99: 500)."""
    tail = min(percentile, 100 - percentile) / 100
    if tail <= 0:
        return 0
    n = int(np.ceil(MIN_TAIL_SAMPLES / tail))
    while not enough_samples(n, percentile):  # the same rounding as enough_samples (99.9: 5001)
        n += 1
    while n > 1 and enough_samples(n - 1, percentile):
        n -= 1
    return n


def percentile_cis(
    sorted_values: np.ndarray, qs: Sequence[float], confidence: float = 0.95
) -> list[tuple[float, float]]:
    """Confidence intervals of several percentiles (0-100) of one sample: the distribution-free
    order-statistic interval. The number of observations below the true percentile is binomial
    (n, q), so the ranks that bracket it with the asked confidence come from that distribution,
    whatever the latencies' own distribution. Exact for up to 2,000 samples, the normal
    approximation beyond. A rank past either end of the sample is clamped to it (such a tail is
    flagged ``low_sample``; where dependence put it there, ``open_sides``). No resampling."""
    n = len(sorted_values)
    if n == 0:
        return []
    ranks = [rank_bounds(n, q / 100, (1 - confidence) / 2) for q in qs]
    return [(float(sorted_values[lo]), float(sorted_values[hi])) for lo, hi in ranks]


def open_sides(n: float, n_eff: float, p: float, alpha: float) -> tuple[bool, bool]:
    """Whether dependence leaves the percentile p (0-1) unbounded below and above: the rank of
    ``rank_bounds`` at n_eff lies beyond the sample where the rank at n does not, and n_eff is
    materially below n (at most n / OPEN_MIN_DEFF). P95: n_eff under 72, at most half of n >= 72."""
    if n_eff * OPEN_MIN_DEFF > n:
        return False, False
    m_e, m = max(1, int(n_eff)), max(1, int(n))
    (lo_e, hi_e), (lo, hi) = rank_bounds(m_e, p, alpha, clamp=False), rank_bounds(m, p, alpha, clamp=False)
    return lo_e < 0 <= lo, hi_e >= m_e and hi < m


def rank_bounds(n: int, p: float, alpha: float, clamp: bool = True) -> tuple[int, int]:
    """0-based ranks (l, u) with P(X_(l) <= percentile <= X_(u)) >= 1 - 2 alpha, as equal tails."""
    if n * p * (1 - p) > 0 and n > _EXACT_BINOMIAL_N:
        z = NormalDist().inv_cdf(1 - alpha)
        half = z * np.sqrt(n * p * (1 - p))
        lo, hi = int(np.floor(n * p - half)), int(np.ceil(n * p + half))
    else:
        lo, hi = _binomial_ranks(n, p, alpha)
    return (int(np.clip(lo, 0, n - 1)), int(np.clip(hi, 0, n - 1))) if clamp else (lo, hi)


def _binomial_ranks(n: int, p: float, alpha: float) -> tuple[int, int]:
    """Exact: lo = the largest k with P(B <= k - 1) <= alpha, hi = the smallest k with
    P(B <= k - 1) >= 1 - alpha, for B ~ Binomial(n, p) (1-based order statistics, made 0-based).
    The pmf is computed in logs (log-factorials as running sums), so no term underflows."""
    if p <= 0:
        return 0, 0
    if p >= 1:
        return n - 1, n - 1
    log_fact = np.concatenate(([0.0], np.cumsum(np.log(np.arange(1, n + 1)))))
    k = np.arange(n + 1)
    log_pmf = log_fact[n] - log_fact[k] - log_fact[n - k] + k * np.log(p) + (n - k) * np.log1p(-p)
    below = np.concatenate(([0.0], np.cumsum(np.exp(log_pmf))))[: n + 1]  # P(B <= k - 1), k = 0..n
    lo = int(np.searchsorted(below, alpha, side="right")) - 1  # largest k with below[k] <= alpha
    hi_hits = np.nonzero(below >= 1 - alpha)[0]
    hi = int(hi_hits[0]) if len(hi_hits) else n + 1
    return lo - 1, hi - 1


def serial_correlation(series: np.ndarray, noise_ses: float = NOISE_SES) -> tuple[float, np.ndarray]:
    """The integrated autocorrelation time tau >= 1 of a series (1: independent; see the module) and
    its autocorrelations rho_0..rho_M over the window (just [1.0] for a short or constant series).
    ``noise_ses``: how many standard errors above 1 a tau must lie to count as dependence."""
    x = np.asarray(series, dtype=np.float64)
    n = len(x)
    y = x - x.mean() if n else x
    if n < MIN_SERIES or not np.any(y):
        return 1.0, np.ones(1)
    size = 1 << (2 * n - 1).bit_length()  # zero padding past 2n - 1 lags; a power of two is fast
    spectrum = np.fft.rfft(y, size)
    cov = np.fft.irfft(spectrum * np.conj(spectrum), size)[:n] / (n - np.arange(n))
    rho = cov / cov[0]
    taus = 2 * np.cumsum(rho) - 1
    inside = np.nonzero(np.arange(n) >= WINDOW_C * taus)[0]
    m = int(inside[0]) if len(inside) else n - 1
    tau = float(taus[m]) / max(1 - 2 * m / n, 0.25)
    if tau < 1 + noise_ses * np.sqrt((4 * m + 2) / n):
        return 1.0, np.ones(1)  # within the estimate's own noise of independence
    tau *= (t975(2 * n / (4 * m + 2)) / Z975) ** 2  # the estimate's own uncertainty
    return float(min(tau, n)), rho[: m + 1]


Z975 = NormalDist().inv_cdf(0.975)


def t975(df: float) -> float:
    """Student's t 97.5 % quantile (Cornish-Fisher from the normal's; within 1 % from 3 df)."""
    z = Z975
    return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df * df)


def window_closed(rho: np.ndarray, n: int) -> bool:
    """Whether serial_correlation's window (``len(rho) - 1`` lags) closed within MAX_WINDOW_SHARE of
    a series of n: otherwise no tau from within the run is to be trusted (say so, do not predict)."""
    return len(rho) - 1 <= MAX_WINDOW_SHARE * n


def serial_time(series: np.ndarray) -> float:
    """tau of serial_correlation alone."""
    return serial_correlation(series)[0]


def cut_indicator(ordered: np.ndarray, q: float) -> np.ndarray:
    """1.0 where a value is at or under the sample's q-th percentile (0-100), else 0.0."""
    out: np.ndarray = (ordered <= np.percentile(ordered, q)).astype(np.float64)
    return out


def design_effects(ordered: np.ndarray, qs: Sequence[float], band: bool = False) -> list[float]:
    """Per percentile (0-100): tau of the indicator "at or under the sample percentile" of values in
    send order, the factor by which serial dependence inflates the percentile's variance. ``band``:
    the largest over the cut levels the true percentile may sit at (``band_correlation``)."""
    x = np.asarray(ordered, dtype=np.float64)
    if len(x) < MIN_SERIES:
        return [1.0] * len(qs)
    if band:
        arr = np.sort(x)
        return [band_correlation(lambda c: cut_indicator(x, c), len(x), q, arr)[0] for q in qs]
    return [serial_time(cut_indicator(x, q)) for q in qs]


def same_level(a: float, b: float) -> bool:
    """Whether two values are one level: within TIE_RESOLUTION of the larger."""
    return abs(a - b) <= TIE_RESOLUTION * max(abs(a), abs(b))


def near_constant(sorted_values: np.ndarray, q: float) -> bool:
    """Whether the q-th percentile (0-100) sits on a tie: the values of its neighbourhood (the
    percentiles q -/+ TIE_NEIGHBOURHOOD) are one level."""
    if len(sorted_values) == 0:
        return True
    d = min(TIE_NEIGHBOURHOOD, q / 2, (100 - q) / 2)
    lo, hi = np.percentile(sorted_values, [q - d, q + d])
    return same_level(float(lo), float(hi))


def band_correlation(
    series_at: Callable[[float], np.ndarray], n: int, q: float, sorted_values: np.ndarray | None = None
) -> tuple[float, np.ndarray]:
    """serial_correlation of ``series_at(c)`` (the indicator, per request, of values at or under
    the c-th percentile) at the worst cut c in the band around percentile q (0-100) of n requests
    (see ``worst_in_band``; ``sorted_values``: the values cut, whose ties with the percentile's
    own are skipped)."""

    def measure(c: float, ses: float) -> _Fit:
        tau, rho = serial_correlation(series_at(c), ses)
        # a band cut whose window leaves its tau few degrees of freedom is no evidence of its own
        steady = 2 * n / (4 * (len(rho) - 1) + 2) >= BAND_MIN_DF or c == q
        return (tau if steady else 1.0), rho

    return worst_in_band(measure, n, q, sorted_values)


_Fit = tuple[float, Any]


def worst_in_band(
    measure: Callable[[float, float], _Fit], n: int, q: float, sorted_values: np.ndarray | None = None
) -> _Fit:
    """The largest design effect ``measure(c, noise_ses)[0]`` over cut levels c the true q-th
    percentile may sit at: the cuts span the BAND_CONFIDENCE interval at the worst effect so far,
    and a cut counts only where it lies inside that interval at its own effect (a cut far out in
    the tail does not widen a median's band by its own dependence alone) and, given the values,
    where its value is a level other than the percentile's (``same_level``)."""
    best = measure(q, NOISE_SES)
    alpha = (1 - BAND_CONFIDENCE) / 2
    levels = sorted_values if sorted_values is not None and len(sorted_values) else None
    own = None if levels is None else float(np.percentile(levels, q))
    for _ in range(BAND_ROUNDS):
        lo, hi = dependent_rank_bounds(n, q / 100, alpha, best[0])
        grown = best
        for rank in np.unique(np.linspace(lo, hi, BAND_CUTS).round()):
            c = float(rank) / max(n - 1, 1) * 100
            if not 0 < c < 100:
                continue
            if levels is not None and own is not None and same_level(float(np.percentile(levels, c)), own):
                continue  # a tie with the percentile's own value, not another level
            fit = measure(c, BAND_NOISE_SES)
            own_lo, own_hi = dependent_rank_bounds(n, q / 100, alpha, fit[0])
            if fit[0] > grown[0] and own_lo <= rank <= own_hi:
                grown = fit
        if grown[0] <= best[0]:
            break
        best = grown
    return best


def dependent_rank_bounds(n: int, p: float, alpha: float, deff: float) -> tuple[int, int]:
    """rank_bounds at the effective sample size n / deff, mapped back onto the n ranks."""
    if deff <= 1:
        return rank_bounds(n, p, alpha)
    n_e = max(1, int(n / deff))
    lo_e, hi_e = rank_bounds(n_e, p, alpha)
    scale = n / n_e
    # A bound at either end of the effective sample is that end of the whole sample (the effective
    # sample's maximum says "beyond what was seen", not its own quantile); and a bound never falls
    # on the wrong side of the percentile itself.
    lo = 0 if lo_e <= 0 else int(np.floor((lo_e + 0.5) * scale - 0.5))
    hi = n - 1 if hi_e >= n_e - 1 else int(np.ceil((hi_e + 0.5) * scale - 0.5))
    point = p * (n - 1)
    lo, hi = min(lo, int(np.floor(point))), max(hi, int(np.ceil(point)))
    return int(np.clip(lo, 0, n - 1)), int(np.clip(hi, 0, n - 1))


def ordered_percentile_cis(
    ordered: np.ndarray, qs: Sequence[float], confidence: float = 0.95
) -> tuple[list[tuple[float, float]], list[float]]:
    """percentile_cis for values in send order, counting serial dependence: the order-statistic
    interval at the effective sample size, the design effect taken over the cut levels the true
    percentile may sit at; a side ``open_sides`` opens unbounded (-inf, inf: a run that moved together
    may sit low), except on a tie (``near_constant``). Returns the intervals and each n_eff."""
    x = np.asarray(ordered, dtype=np.float64)
    n = len(x)
    if n == 0:
        return [], []
    deffs = design_effects(x, qs, band=True)
    arr = np.sort(x)
    alpha = (1 - confidence) / 2
    cis = []
    for q, d in zip(qs, deffs, strict=True):
        lo, hi = dependent_rank_bounds(n, q / 100, alpha, d)
        tie = near_constant(arr, q)  # a level that barely moves: its ranks bound it (as ever)
        below, above = (False, False) if tie else open_sides(n, n / max(d, 1.0), q / 100, alpha)
        cis.append((-math.inf if below else float(arr[lo]), math.inf if above else float(arr[hi])))
    return cis, [n / d for d in deffs]


def percentile_ci(sorted_values: np.ndarray, q: float, confidence: float = 0.95) -> tuple[float, float]:
    """Confidence interval of the q-th percentile (0-100); see percentile_cis."""
    return percentile_cis(sorted_values, [q], confidence)[0]


def describe(
    values: Sequence[float] | np.ndarray, with_ci: bool = True, ordered: bool = False
) -> Distribution:
    """Mean, spread and percentiles (linear interpolation, numpy's default) of the samples.
    ``ordered``: the values are in send order, and the intervals count the requests that moved
    together (``n_eff``, per percentile where below n; ``low_sample`` stays a count of requests: a
    verdict that needs effective observations beyond a percentile reads ``n_eff``)."""
    raw = np.asarray(values, dtype=np.float64)
    arr = np.sort(raw)
    n = len(arr)
    if n == 0:
        return Distribution(n=0)
    pcts = np.percentile(arr, PERCENTILES)
    std = float(arr.std(ddof=1)) if n > 1 else 0.0
    dist = Distribution(n=n, mean=float(arr.mean()), std=std, min=float(arr[0]), max=float(arr[-1]))
    n_effs = [float(n)] * len(PERCENTILES)
    cis = None
    if with_ci and ordered:
        cis, n_effs = ordered_percentile_cis(raw, PERCENTILES)
    elif with_ci:
        cis = percentile_cis(arr, PERCENTILES)
    for i, (p, v) in enumerate(zip(PERCENTILES, pcts, strict=True)):
        setattr(dist, f"p{p}", float(v))
        if cis is not None:
            dist.ci95[f"p{p}"] = cis[i]
        if n_effs[i] < n:
            dist.n_eff[f"p{p}"] = round(n_effs[i], 1)
        if not enough_samples(n, p):
            dist.low_sample.append(f"p{p}")
    return dist
