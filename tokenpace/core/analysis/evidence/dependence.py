"""Resampling plan for requests that move together in time: circular blocks in send order. Pure.

Under a queue or a host stall, requests sent close together are slow together; resampling them one
by one would treat a burst as many independent observations. The plan, per sample:

- the serial dependence of each percentile: tau_q of the indicator "at or under P_q" along the
  requests in send order (``core.stats.serial_correlation``; for ITL, each request's share of gaps
  under it), and the effective sample size n / tau_q (for ITL: requests / tau_q);
- the block length b = ceil(2 max tau_q) requests (1, the plain bootstrap, when max tau_q < 1.5),
  at most a quarter of the requests; blocks start anywhere and wrap around the end (circular);
- the share of the dependence a block of b captures, 1 + 2 sum_k<b (1 - k/b) rho_k (Bartlett
  weights), against tau_q: each percentile's resampled spread around the sample's is widened by
  sqrt(tau_q / captured) where blocks short of the dependence would understate it.

Independent requests get tau near 1, blocks of 1 and the plain bootstrap's intervals.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tokenpace.core.analysis.evidence.samples import Samples
from tokenpace.core.stats import cut_indicator, serial_correlation

BLOCK_FROM_TAU = 2.0  # block length in units of the integrated autocorrelation time
PLAIN_BELOW_TAU = 1.5  # below it, blocks of one request (the plain bootstrap)
MIN_BLOCKS = 4  # a block is at most 1/MIN_BLOCKS of the requests


@dataclass(frozen=True, slots=True)
class Dependence:
    """How one sample's requests move together, per asked percentile."""

    groups: list[np.ndarray]  # the requests' values, in send order
    taus: np.ndarray  # per percentile: variance inflation from serial dependence (>= 1)
    widen: np.ndarray  # per percentile: spread factor for what blocks of ``block`` miss (>= 1)
    block: int  # requests per block
    n_eff: np.ndarray  # per percentile: effective sample size


def _captured(rho: np.ndarray, block: int) -> float:
    k = np.arange(1, min(block, len(rho)))
    return float(1 + 2 * np.sum((1 - k / block) * rho[k]))


def _series(groups: list[np.ndarray], flat: bool, q: float, values: np.ndarray) -> np.ndarray:
    if flat:
        return cut_indicator(values, q)
    cut = np.percentile(values, q)
    return np.array([float(np.mean(g <= cut)) for g in groups])


def dependence(samples: Samples, qs: Sequence[float]) -> Dependence:
    """The resampling plan of a non-empty sample for percentiles ``qs`` (0-100)."""
    groups = samples.in_send_order()
    flat = samples.flat
    values = np.concatenate(groups) if groups else np.empty(0)
    fits = [serial_correlation(_series(groups, flat, q, values)) for q in qs]
    taus = np.array([t for t, _ in fits]) if fits else np.ones(0)
    units = len(groups)
    block = block_length(taus, units)
    widen = np.array([math.sqrt(max(1.0, t / max(_captured(rho, block), 1.0))) for t, rho in fits])
    base = len(values) if flat else units
    return Dependence(groups, taus, widen, block, base / np.maximum(taus, 1.0))


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
