"""Resampling plan for requests that move together in time: circular blocks in send order. Pure.

Under a queue or a host stall, requests sent close together are slow together; resampling them one
by one would treat a burst as many independent observations. The plan, per sample:

- the serial dependence of each percentile: tau_q of the indicator "at or under P_q" along the
  requests in send order (for ITL, each request's share of gaps under it), the largest over the cut
  levels the true P_q may sit at (``core.stats.band_correlation``), and the effective sample size
  n / tau_q (for ITL: requests / tau_q);
- the block length b = ceil(2 max tau_q) requests (1, the plain bootstrap, when max tau_q < 1.5),
  at most a quarter of the requests; blocks start anywhere and wrap around the end (circular);
- the share of the dependence a block of b captures, 1 + 2 sum_k<b (1 - k/b) rho_k (Bartlett
  weights), against tau_q: each percentile's resampled spread around the sample's is widened by
  sqrt(tau_q / captured) where blocks short of the dependence would understate it;
- a floor under that spread: the SD the distribution-free order-statistic interval at n_eff implies
  (its width / 2 x 1.96). A tail percentile that rests on a few episodes (stalls) is resampled as
  a handful of blocks whose spread understates it; the rank interval does not depend on its shape.
  No floor where the percentile sits on a tie (``core.stats.near_constant``): there the ranks of a
  few effective requests reach the run's outliers while the level itself barely moves.

Where requests carry a user or session (``Samples.cluster``), the same is measured for whole
clusters (``evidence.clusters.band_cluster_effect``); when it is the larger design effect, the plan
resamples whole users or sessions instead of blocks of time, and ``by`` says which was used, with
how many users or sessions there were and about how many would leave each percentile enough
effective requests. The floor then carries what a bootstrap of a few clusters cannot (their t).

A percentile whose window did not close within a quarter of the requests (``core.stats.
window_closed``) is marked not ``identified``: its requests moved together over much of the run, and
a verdict resting on that run alone is undecided (``comparison.compare``). So is every percentile
where the median's window did not close: the bulk of the run drifting is no steady state whose tail
one run could measure either.

Independent requests get tau near 1, blocks of 1 and the plain bootstrap's intervals.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tokenpace.core.analysis.evidence.clusters import band_cluster_effect, cluster_df, clusters_needed
from tokenpace.core.analysis.evidence.samples import Samples
from tokenpace.core.stats import (
    band_correlation,
    cut_indicator,
    dependent_rank_bounds,
    near_constant,
    serial_correlation,
    window_closed,
)

BLOCK_FROM_TAU = 2.0  # block length in units of the integrated autocorrelation time
PLAIN_BELOW_TAU = 1.5  # below it, blocks of one request (the plain bootstrap)
MIN_BLOCKS = 4  # a block is at most 1/MIN_BLOCKS of the requests
_Z = 1.959964  # the 97.5 % normal quantile: the floor's interval is a 95 % one


@dataclass(frozen=True, slots=True)
class Dependence:
    """How one sample's requests move together, per asked percentile."""

    groups: list[np.ndarray]  # the resampled units' values: requests in send order, or clusters
    taus: np.ndarray  # per percentile: variance inflation from the dependence resampled (>= 1)
    widen: np.ndarray  # per percentile: spread factor for what blocks of ``block`` miss (>= 1)
    block: int  # requests per block
    n_eff: np.ndarray  # per percentile: effective sample size
    floor_sd: np.ndarray  # per percentile: the least SD of its resampled values (0: none)
    by: str = "requests"  # what is resampled: "requests", "time blocks", "user", "session"
    identified: np.ndarray | None = None  # per percentile: the run itself identified its dependence
    clusters: int = 0  # by user or session: how many held two requests or more
    clusters_needed: np.ndarray | None = None  # ... per percentile, about how many would decide (0: ?)


def captured(rho: np.ndarray, block: int) -> float:
    """The variance inflation blocks of ``block`` capture of a series with autocorrelations ``rho``."""
    k = np.arange(1, min(block, len(rho)))
    return float(1 + 2 * np.sum((1 - k / block) * rho[k]))


def _series(groups: list[np.ndarray], flat: bool, q: float, values: np.ndarray) -> np.ndarray:
    """Per request: 1.0 at or under the values' q-th percentile, or (ITL) its share of gaps there."""
    if flat:
        return cut_indicator(values, q)
    sizes = np.array([len(g) for g in groups])
    under = (values <= np.percentile(values, q)).astype(np.float64)
    out: np.ndarray = np.bincount(np.repeat(np.arange(len(groups)), sizes), weights=under) / sizes
    return out


def dependence(samples: Samples, qs: Sequence[float]) -> Dependence:
    """The resampling plan of a non-empty sample for percentiles ``qs`` (0-100)."""
    groups = samples.in_send_order()
    flat = samples.flat
    values = np.concatenate(groups) if groups else np.empty(0)
    units = len(groups)
    ordered = np.sort(values)
    fits = [band_correlation(lambda c: _series(groups, flat, c, values), units, q, ordered) for q in qs]
    taus = np.array([t for t, _ in fits]) if fits else np.ones(0)
    base = len(values) if flat else units
    keyed = samples.clusters_in_send_order()
    if keyed is not None and len(qs):
        kind, codes = keyed
        deffs = np.array(
            [band_cluster_effect(lambda c: _series(groups, flat, c, values), codes, q, ordered) for q in qs]
        )
        if float(np.max(deffs)) > max(1.0, float(np.max(taus))):
            clusters = [
                np.concatenate([groups[i] for i in np.nonzero(codes == c)[0]]) for c in np.unique(codes)
            ]
            floor = _floor_sd(ordered, qs, deffs)
            known = np.ones(len(qs), dtype=bool)
            sizes = np.bincount(codes)
            count, df = int(np.sum(sizes > 1)), cluster_df(codes)
            need = [
                clusters_needed(count, df, float(d), base, q) or 0 for d, q in zip(deffs, qs, strict=True)
            ]
            needs = np.array(need, dtype=np.int64)
            return Dependence(
                clusters, deffs, np.ones(len(qs)), 1, base / deffs, floor, kind, known, count, needs
            )
    block = block_length(taus, units)
    widen = np.array([math.sqrt(max(1.0, t / max(captured(rho, block), 1.0))) for t, rho in fits])
    n_eff = base / np.maximum(taus, 1.0)
    by = "time blocks" if block > 1 else "requests"
    steady = window_closed(serial_correlation(_series(groups, flat, 50.0, values))[1], units)
    known = np.array([steady and window_closed(rho, units) for _, rho in fits], dtype=bool)
    return Dependence(groups, taus, widen, block, n_eff, _floor_sd(ordered, qs, taus), by, known)


def _floor_sd(ordered: np.ndarray, qs: Sequence[float], deffs: np.ndarray) -> np.ndarray:
    """Per percentile: the SD implied by its order-statistic interval at the sorted values' count /
    deff (0 where independent, or where the percentile sits on a tie: ranks away from a near-constant
    level reach the run's outliers, while the level itself barely moves)."""
    n = len(ordered)
    out = np.zeros(len(qs))
    if n < 2:
        return out
    for j, q in enumerate(qs):
        if deffs[j] <= 1 or near_constant(ordered, q):
            continue
        lo, hi = dependent_rank_bounds(n, q / 100, 0.025, float(deffs[j]))
        out[j] = (ordered[hi] - ordered[lo]) / (2 * _Z)
    return out


def block_length(taus: np.ndarray | Sequence[float], units: int) -> int:
    """Requests per block for these percentiles' taus among ``units`` requests (see the module)."""
    top = float(np.max(taus)) if len(taus) else 1.0
    if top < PLAIN_BELOW_TAU:
        return 1
    return max(1, min(math.ceil(BLOCK_FROM_TAU * top), units // MIN_BLOCKS))


def block_draws(units: int, block: int, size: int, rng: np.random.Generator) -> np.ndarray:
    """``size`` resamples of ``units`` indices drawn in circular blocks of ``block``: shape (size, units)."""
    if block <= 1:
        return rng.integers(0, units, size=(size, units))
    count = -(-units // block)
    starts = rng.integers(0, units, size=(size, count))
    idx = (starts[:, :, None] + np.arange(block)) % units
    return idx.reshape(size, count * block)[:, :units]
