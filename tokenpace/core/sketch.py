"""A streaming percentile sketch with a fixed memory and a stated relative error. Pure.

Log-spaced buckets (the DDSketch construction): bucket ``j`` holds the values in
``(gamma^(j-1), gamma^j]`` with ``gamma = (1 + a) / (1 - a)``, and answers for them with
``2 gamma^j / (gamma + 1)``, which is within a relative ``a`` of every value in the bucket. A
percentile is numpy's linear interpolation between two order statistics, each estimated within
``a``, so the percentile is within ``a`` of numpy's on the same values (then clamped to the exact
minimum and maximum, which only brings it closer).

The bucket range is fixed: ``MIN_VALUE`` (1 microsecond, for values in ms) to ``MAX_VALUE`` (10^9 ms,
11.6 days) in ``BUCKETS`` buckets (about 11 KB of counts a sketch, whatever the number of values).
Values below ``MIN_VALUE`` (zero, negative) are counted in one low bucket answered by 0 (clamped to the
exact minimum): their absolute error is below ``MIN_VALUE``. Values above ``MAX_VALUE`` land in the
top bucket (clamped to the exact maximum).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from tokenpace.core.stats import PERCENTILES, Distribution, enough_samples, rank_bounds

RELATIVE_ERROR = 0.01  # every percentile the sketch gives is within 1 % of numpy's on the same values
MIN_VALUE = 1e-3  # below: the low bucket (absolute error < MIN_VALUE)
MAX_VALUE = 1e9
_GAMMA = (1 + RELATIVE_ERROR) / (1 - RELATIVE_ERROR)
_LOG_GAMMA = math.log(_GAMMA)
_LOW_INDEX = math.ceil(math.log(MIN_VALUE) / _LOG_GAMMA)  # the first log bucket's j
BUCKETS = math.ceil(math.log(MAX_VALUE) / _LOG_GAMMA) - _LOW_INDEX + 2  # + the low bucket (0)


class LogSketch:
    """Count, mean, spread, exact min/max and log-bucketed counts of a stream of values."""

    __slots__ = ("counts", "m2", "max", "mean", "min", "n")

    def __init__(self) -> None:
        self.counts = np.zeros(BUCKETS, dtype=np.int64)
        self.n = 0
        self.mean = 0.0
        self.m2 = 0.0  # sum of squared deviations from the mean (Chan's parallel update)
        self.min = math.inf
        self.max = -math.inf

    def add_many(self, values: Sequence[float] | np.ndarray) -> None:
        v = np.asarray(values, dtype=np.float64)
        k = len(v)
        if k == 0:
            return
        idx = np.zeros(k, dtype=np.int64)
        pos = v >= MIN_VALUE
        if pos.any():
            j = np.ceil(np.log(v[pos]) / _LOG_GAMMA).astype(np.int64) - _LOW_INDEX + 1
            idx[pos] = np.clip(j, 1, BUCKETS - 1)
        self.counts += np.bincount(idx, minlength=BUCKETS)
        mean_b = float(v.mean())
        m2_b = float(((v - mean_b) ** 2).sum())
        n = self.n + k
        delta = mean_b - self.mean
        self.mean += delta * k / n
        self.m2 += m2_b + delta * delta * self.n * k / n
        self.n = n
        self.min = min(self.min, float(v.min()))
        self.max = max(self.max, float(v.max()))

    def merge(self, other: LogSketch) -> None:
        """Fold another sketch in (a replica's, a worker's): the same as adding its values here."""
        if other.n == 0:
            return
        self.counts += other.counts
        n = self.n + other.n
        delta = other.mean - self.mean
        self.mean += delta * other.n / n
        self.m2 += other.m2 + delta * delta * self.n * other.n / n
        self.n = n
        self.min = min(self.min, other.min)
        self.max = max(self.max, other.max)

    def _value(self, bucket: int) -> float:
        est = 0.0 if bucket == 0 else 2 * _GAMMA ** (bucket - 1 + _LOW_INDEX) / (_GAMMA + 1)
        return min(max(est, self.min), self.max)

    def _at_rank(self, cum: np.ndarray, rank: int) -> float:
        """The rank-th smallest value (0-based): exact at either end, else its bucket's answer."""
        if rank == 0:
            return self.min
        if rank == self.n - 1:
            return self.max
        return self._value(int(np.searchsorted(cum, rank, side="right")))  # first bucket with cum > rank

    def percentiles(self, qs: Sequence[float]) -> list[float]:
        """The q-th percentiles (0-100), numpy's linear interpolation, each within RELATIVE_ERROR."""
        if self.n == 0:
            return []
        cum = np.cumsum(self.counts)
        out = []
        for q in qs:
            h = (self.n - 1) * q / 100
            lo = math.floor(h)
            hi = min(lo + 1, self.n - 1)
            v_lo, v_hi = self._at_rank(cum, lo), self._at_rank(cum, hi)
            out.append(v_lo + (h - lo) * (v_hi - v_lo))
        return out

    def distribution(self, with_ci: bool = False) -> Distribution:
        """As ``core.stats.describe`` would give. ``with_ci``: each percentile's distribution-free
        95 % interval, as describe's (the order statistics at the binomial rank bounds), read from
        the cumulative counts and widened by the sketch's own error, so the bound stays a bound."""
        if self.n == 0:
            return Distribution(n=0)
        dist = Distribution(
            n=self.n,
            mean=self.mean,
            std=math.sqrt(self.m2 / (self.n - 1)) if self.n > 1 else 0.0,
            min=self.min,
            max=self.max,
        )
        cum = np.cumsum(self.counts) if with_ci else None
        for p, value in zip(PERCENTILES, self.percentiles(PERCENTILES), strict=True):
            setattr(dist, f"p{p}", value)
            if cum is not None:
                lo, hi = rank_bounds(self.n, p / 100, 0.025)
                a = RELATIVE_ERROR
                low = max(self.min, self._at_rank(cum, lo) * (1 - a) - MIN_VALUE)
                dist.ci95[f"p{p}"] = (low, min(self.max, self._at_rank(cum, hi) * (1 + a) + MIN_VALUE))
            if not enough_samples(self.n, p):
                dist.low_sample.append(f"p{p}")
        return dist
