"""Requests of one user or session that move together (one user's long prompts, one session's
growing context): the variance inflation of a percentile's indicator from the clusters' sums. Pure.

sum_c (S_c - m_c p)^2 / (n p (1 - p)) x C / (C - 1) for C clusters: the between-cluster mean
square over the variance per request (one-way ANOVA's F, whose expectation is the design effect).
It rests on the clusters, not the requests: its degrees of freedom are those of C clusters of
unequal sizes m_c, (sum m_c^2)^2 / sum m_c^4 - 1 (Satterthwaite; C - 1 when equal), so a few users
that hold most requests give few however many single requests stand beside them. Within its noise
of 1 (the chi-square point ``noise_ses`` normal SEs up, as ``core.stats.serial_correlation``'s tau)
it is taken as 1: users that do not differ keep the plain intervals. Otherwise it is raised by
(t/z)^2 at those degrees of freedom (exact t down to 1): the interval is then the t interval of C
cluster means, exact where their effects are normal (4.3 SEs a side from 3 users, 2.1 from 20).
Under 1 degree of freedom (one user, or one beside single requests) nothing is compared.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from tokenpace.core.analysis.evidence.runnoise import t_quantile
from tokenpace.core.stats import NOISE_SES, Z975, samples_needed, worst_in_band

MIN_DF = 1.0  # fewer degrees of freedom between clusters: no cluster design effect (nothing to compare)
MAX_CLUSTERS_ADVISED = 10_000  # bound of the search for the clusters that would decide


def cluster_df(cluster: np.ndarray) -> float:
    """Degrees of freedom of the between-cluster variance of clusters ``cluster`` (an id per request)."""
    sizes = np.unique(cluster, return_counts=True)[1].astype(np.float64)
    if len(sizes) < 2:
        return 0.0
    return float(min(len(sizes) - 1, np.sum(sizes**2) ** 2 / np.sum(sizes**4) - 1))


def chi2_share(df: float, z: float) -> float:
    """chi^2 / df at the normal quantile ``z`` (Wilson-Hilferty): where an F on ``df`` degrees of
    freedom over very many lies ``z`` SEs above 1, skewed as an F of few clusters is."""
    h = 2 / (9 * df)
    return float((1 - h + z * math.sqrt(h)) ** 3)


def t_widening(df: float) -> float:
    """(t/z)^2 at ``df`` (97.5 %): a fractional df below 3 rounds down (the wider quantile)."""
    t = t_quantile(0.975, math.floor(df) if df < 3 else df)
    return (t / Z975) ** 2


def cluster_design_effect(indicator: np.ndarray, cluster: np.ndarray, noise_ses: float = NOISE_SES) -> float:
    """Variance inflation of the mean of ``indicator`` (per request) when the requests of one
    cluster (``cluster``: an integer id per request) move together; 1 where independent (module)."""
    x = np.asarray(indicator, dtype=np.float64)
    n = len(x)
    codes = np.unique(cluster, return_inverse=True)[1]
    count = int(codes.max()) + 1 if n else 0
    p = float(x.mean()) if n else 0.0
    df = cluster_df(codes) if n else 0.0
    if df < MIN_DF or not 0 < p < 1:
        return 1.0
    var = float(np.mean((x - p) ** 2))  # p (1 - p) for an indicator; less for shares (ITL)
    if var <= 0:
        return 1.0
    resid = np.bincount(codes, weights=x - p, minlength=count)
    deff = count / (count - 1) * float(np.sum(resid**2)) / (n * var)
    if deff < chi2_share(df, noise_ses):
        return 1.0
    return float(min(deff * t_widening(df), n))


def band_cluster_effect(
    series_at: Callable[[float], np.ndarray],
    cluster: np.ndarray,
    q: float,
    sorted_values: np.ndarray | None = None,
) -> float:
    """cluster_design_effect at the worst cut of percentile q's band (as band_correlation)."""
    fit = worst_in_band(
        lambda c, ses: (cluster_design_effect(series_at(c), cluster, ses), None),
        len(cluster),
        q,
        sorted_values,
    )
    return float(fit[0])


def clusters_needed(count: int, df: float, deff: float, n: float, q: float) -> int | None:
    """About how many clusters of the same size and effect would leave percentile q (0-100) enough
    effective requests (``core.stats.samples_needed``), from ``count`` clusters (``df`` degrees of
    freedom) of ``n`` requests whose design effect was ``deff`` (raised as above); None past
    MAX_CLUSTERS_ADVISED."""
    need = samples_needed(q)
    size = n / max(count, 1)
    if size <= 1 or deff <= 1:
        return None
    point = deff / t_widening(df)  # the estimate before its own uncertainty
    rho = max(point - 1, 0.0) / (size - 1)  # the share of the variance between clusters
    more = count
    while more <= MAX_CLUSTERS_ADVISED:
        grown = more - count + df  # each cluster more, one degree of freedom more
        if more * size / ((1 + (size - 1) * rho) * t_widening(max(grown, MIN_DF))) >= need:
            return more
        more = more + 1 if more < 100 else math.ceil(more * 1.05)
    return None
