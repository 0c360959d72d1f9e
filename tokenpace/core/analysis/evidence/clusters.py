"""Requests of one user or session that move together (one user's long prompts, one session's
growing context): the variance inflation of a percentile's indicator from the clusters' sums. Pure.

sum_c (S_c - m_c p)^2 / (n p (1 - p)) x C / (C - 1) for C clusters, taken as 1 within its noise of
1 and raised by (t/z)^2 at C - 1 degrees of freedom, as ``core.stats.serial_correlation``'s tau is.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tokenpace.core.stats import NOISE_SES, Z975, t975, worst_in_band

# Fewer clusters than this give no cluster design effect (too few to estimate a variance between).
MIN_CLUSTERS = 10


def cluster_design_effect(indicator: np.ndarray, cluster: np.ndarray, noise_ses: float = NOISE_SES) -> float:
    """Variance inflation of the mean of ``indicator`` (per request) when the requests of one
    cluster (``cluster``: an integer id per request) move together; 1 where independent (module)."""
    x = np.asarray(indicator, dtype=np.float64)
    n = len(x)
    codes = np.unique(cluster, return_inverse=True)[1]
    count = int(codes.max()) + 1 if n else 0
    p = float(x.mean()) if n else 0.0
    if count < MIN_CLUSTERS or not 0 < p < 1:
        return 1.0
    var = float(np.mean((x - p) ** 2))  # p (1 - p) for an indicator; less for shares (ITL)
    if var <= 0:
        return 1.0
    resid = np.bincount(codes, weights=x - p, minlength=count)
    deff = count / (count - 1) * float(np.sum(resid**2)) / (n * var)
    if deff < 1 + noise_ses * np.sqrt(2 / (count - 1)):
        return 1.0
    deff *= (t975(count - 1) / Z975) ** 2
    return float(min(deff, n))


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
