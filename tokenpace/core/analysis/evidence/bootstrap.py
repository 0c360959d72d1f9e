"""Bootstrap confidence intervals of percentile differences between two independent samples. Pure.

Each side is resampled over requests (a request's ITL gaps travel together) in circular blocks of
requests in send order, as long as their dependence calls for (``dependence``: blocks of one where
requests are independent), the percentiles of both resamples are differenced, and the interval is
the percentile-method interval of those differences. The generator is seeded: the same inputs give
the same interval.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tokenpace.core.analysis.evidence.dependence import Dependence, block_draws, dependence
from tokenpace.core.analysis.evidence.samples import Samples

DEFAULT_RESAMPLES = 1000
MIN_RESAMPLES = 200
# Values drawn per side (resamples x sample size); beyond it fewer resamples are drawn.
_BUDGET = 20_000_000
_BATCH_ELEMENTS = 2_000_000


@dataclass(frozen=True, slots=True)
class DiffEstimate:
    a: float  # percentile of A
    b: float  # percentile of B
    diff: float  # b - a
    lo: float  # confidence interval of b - a
    hi: float
    rel: float | None  # (b - a) / a
    rel_lo: float | None  # confidence interval of (b - a) / a
    rel_hi: float | None
    p_value: float  # bootstrap two-sided p-value of "no difference"
    resamples: int


def resample_percentiles(
    samples: Samples,
    qs: Sequence[float],
    resamples: int,
    rng: np.random.Generator,
    plan: Dependence | None = None,
) -> np.ndarray:
    """Percentiles ``qs`` of ``resamples`` bootstrap resamples: shape (resamples, len(qs)), drawn
    in blocks of time by ``plan`` (computed from the sample when not given)."""
    plan = plan or dependence(samples, qs)
    groups = plan.groups
    values = np.concatenate(groups)
    qs_arr = np.asarray(qs, dtype=np.float64)
    units = len(groups)
    if all(len(g) == 1 for g in groups):
        batch = max(1, _BATCH_ELEMENTS // units)
        ranked = np.all(np.isfinite(values))  # else numpy's percentile, for its NaN
        order = np.argsort(values, kind="stable")
        ranks = np.empty(units, dtype=np.int32)
        ranks[order] = np.arange(units)
        out = []
        for start in range(0, resamples, batch):
            draws = block_draws(units, plan.block, min(batch, resamples - start), rng)
            if ranked:
                out.append(drawn_percentiles(values[order], ranks[draws], qs_arr))
            else:
                out.append(np.percentile(values[draws], qs_arr, axis=1).T)
        boot = np.concatenate(out).reshape(resamples, len(qs_arr))
    else:
        # Clustered: draw requests, repeat each request's values as often as drawn.
        sizes = np.array([len(g) for g in groups])
        group_of = np.repeat(np.arange(units), sizes)
        boot = np.empty((resamples, len(qs_arr)))
        for i in range(resamples):
            counts = np.bincount(block_draws(units, plan.block, 1, rng)[0], minlength=units)
            drawn = np.repeat(values, counts[group_of])
            boot[i] = np.percentile(drawn, qs_arr) if len(drawn) else np.nan
    if np.any(plan.widen > 1) or np.any(plan.floor_sd > 0):
        centre = np.percentile(values, qs_arr)
        boot = centre + (boot - centre) * _spread_factor(boot, plan, centre)
    return boot


def drawn_percentiles(ordered: np.ndarray, drawn: np.ndarray, qs: np.ndarray) -> np.ndarray:
    """Percentiles ``qs`` (0-100) of each row of resampled values, given as ranks into the sorted
    values ``ordered`` (``drawn``: shape (resamples, n)): shape (resamples, len(qs)), equal to
    ``np.percentile(ordered[drawn], qs, axis=1).T`` (its linear interpolation, to the last bit).
    A resample's k-th smallest value is ``ordered`` at its k-th smallest rank: sorting small
    integers row by row costs a fraction of selecting among the floats."""
    n = drawn.shape[1]
    ranked = np.sort(drawn.astype(np.int32, copy=False), axis=1)
    virtual = (n - 1) * (qs / 100)
    below = np.floor(virtual)
    gamma = virtual - below
    a = ordered[ranked[:, np.clip(below, 0, n - 1).astype(np.int64)]]
    b = ordered[ranked[:, np.clip(below + 1, 0, n - 1).astype(np.int64)]]
    diff = b - a
    lerp: np.ndarray = np.where(gamma >= 0.5, b - diff * (1 - gamma), a + diff * gamma)
    return lerp


def _spread_factor(boot: np.ndarray, plan: Dependence, centre: np.ndarray) -> np.ndarray:
    """Per percentile: widen by what blocks miss, and at least up to the plan's floor SD; the SD so
    widened at most the level itself (more says only "anything from zero up", as one host stall far
    past the percentile does, and an interval on the log scale cannot hold it)."""
    raw = np.nanstd(boot, axis=0, ddof=1) if len(boot) > 1 else np.zeros(len(plan.widen))
    sd = raw * plan.widen
    floor = np.where(sd > 0, plan.floor_sd / np.where(sd > 0, sd, 1.0), 1.0)
    cap = np.where(raw > 0, np.abs(centre) / np.where(raw > 0, raw, 1.0), np.inf)
    out: np.ndarray = np.minimum(plan.widen * np.maximum(1.0, floor), np.maximum(cap, 1.0))
    return out


def resamples_for(n_values: int, wanted: int) -> int:
    if n_values * wanted <= _BUDGET:
        return wanted
    return max(MIN_RESAMPLES, _BUDGET // max(n_values, 1))


def percentile_differences(
    a: Samples,
    b: Samples,
    qs: Sequence[float],
    confidence: float = 0.95,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> dict[float, DiffEstimate]:
    """Point estimate, CI and bootstrap p-value of P_q(B) - P_q(A) for each q. Both sides non-empty."""
    va, vb = a.values, b.values
    if len(va) == 0 or len(vb) == 0:
        raise ValueError("both samples need at least one value")
    count = min(resamples_for(len(va), resamples), resamples_for(len(vb), resamples))
    stat_a = resample_percentiles(a, qs, count, np.random.default_rng([seed, 0]))
    stat_b = resample_percentiles(b, qs, count, np.random.default_rng([seed, 1]))
    diffs = stat_b - stat_a
    alpha = 1 - confidence
    out: dict[float, DiffEstimate] = {}
    for j, q in enumerate(qs):
        pa = float(np.percentile(va, q))
        pb = float(np.percentile(vb, q))
        d = diffs[:, j]
        finite = np.isfinite(d)
        lo, hi = (float(x) for x in np.quantile(d[finite], [alpha / 2, 1 - alpha / 2]))
        p = min(1.0, 2 * min(float(np.mean(d[finite] <= 0)), float(np.mean(d[finite] >= 0))))
        rel = rel_lo = rel_hi = None
        if pa > 0:
            rel = (pb - pa) / pa
            base = stat_a[:, j]
            ok = finite & (base > 0)
            if ok.any():
                r = d[ok] / base[ok]
                rel_lo, rel_hi = (float(x) for x in np.quantile(r, [alpha / 2, 1 - alpha / 2]))
        out[q] = DiffEstimate(pa, pb, pb - pa, lo, hi, rel, rel_lo, rel_hi, p, count)
    return out
