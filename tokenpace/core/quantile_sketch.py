"""A bounded streaming summary of one metric's distribution: log-spaced buckets (DDSketch style). Pure.

For runs too long to keep every sample (a day of virtual traffic is 8.6 M requests). Values are
counted in buckets whose bounds grow by the ratio gamma = (1 + a) / (1 - a), a = RELATIVE_ERROR; a
percentile is reported from its bucket's midpoint 2 gamma^i / (gamma + 1), which lies within a
relative error a of every value in that bucket, so the reported percentile is within a (1 %) of the
value numpy's linear interpolation gives on the whole sample. Memory is fixed whatever the count:
BUCKETS + 1 counters (values at or under MIN_VALUE share bucket 0; values past the top the last).
Count, mean, standard deviation, minimum and maximum are exact. Values come in numpy batches, so a
caller buffers a bounded chunk and folds it in with one vectorised call.
"""

from __future__ import annotations

import math

import numpy as np

from tokenpace.core.stats import Distribution, enough_samples

RELATIVE_ERROR = 0.01
MIN_VALUE = 1e-3  # in the metric's unit: 1 us for milliseconds
BUCKETS = 1400  # MIN_VALUE x gamma^1400 is about 1.4e9: 16 days in milliseconds
_GAMMA = (1 + RELATIVE_ERROR) / (1 - RELATIVE_ERROR)
_LOG_GAMMA = math.log(_GAMMA)
_REPORTED = (50, 90, 95, 99)


class QuantileSketch:
    """Counts of non-negative values in log buckets, plus exact moments and extremes."""

    __slots__ = ("_counts", "max", "min", "n", "total", "total_sq")

    def __init__(self) -> None:
        self._counts = np.zeros(BUCKETS + 1, dtype=np.int64)
        self.n = 0
        self.total = 0.0
        self.total_sq = 0.0
        self.min = math.inf
        self.max = -math.inf

    def add(self, values: np.ndarray) -> None:
        """Fold a batch of values (negative ones count as 0)."""
        if not len(values):
            return
        v = np.maximum(np.asarray(values, dtype=np.float64), 0.0)
        index = np.zeros(len(v), dtype=np.int64)
        big = v > MIN_VALUE
        index[big] = np.minimum(np.ceil(np.log(v[big] / MIN_VALUE) / _LOG_GAMMA), BUCKETS).astype(np.int64)
        self._counts += np.bincount(index, minlength=BUCKETS + 1)
        self.n += len(v)
        self.total += float(v.sum())
        self.total_sq += float(np.dot(v, v))
        self.min = min(self.min, float(v.min()))
        self.max = max(self.max, float(v.max()))

    def merge(self, other: QuantileSketch) -> None:
        self._counts += other._counts
        self.n += other.n
        self.total += other.total
        self.total_sq += other.total_sq
        self.min = min(self.min, other.min)
        self.max = max(self.max, other.max)

    def _value(self, bucket: int) -> float:
        if bucket == 0:
            return max(self.min, 0.0)
        if bucket == BUCKETS:  # past the top: no bound to report but the exact maximum
            return self.max
        mid = MIN_VALUE * 2 * _GAMMA**bucket / (_GAMMA + 1)
        return min(max(mid, self.min), self.max)

    def quantile(self, q: float) -> float | None:
        """The q-quantile (0-1) as numpy's linear interpolation places it, within RELATIVE_ERROR."""
        if self.n == 0:
            return None
        rank = q * (self.n - 1)
        below, above = math.floor(rank), math.ceil(rank)
        cumulative = np.cumsum(self._counts)
        lo, hi = np.searchsorted(cumulative, [below + 1, above + 1])
        frac = rank - below
        return self._value(int(lo)) * (1 - frac) + self._value(int(hi)) * frac

    def distribution(self) -> Distribution:
        """The core's Distribution of what was folded in (no confidence intervals: a sketch keeps no
        samples to bootstrap or rank; the percentiles carry the sketch's relative error)."""
        if self.n == 0:
            return Distribution(n=0)
        mean = self.total / self.n
        var = max(self.total_sq / self.n - mean * mean, 0.0) * self.n / max(self.n - 1, 1)
        q = self.quantile
        low = [f"p{p}" for p in _REPORTED if not enough_samples(self.n, p)]
        return Distribution(
            n=self.n, mean=mean, std=math.sqrt(var), min=self.min, max=self.max,
            p50=q(0.5), p90=q(0.9), p95=q(0.95), p99=q(0.99), low_sample=low,
        )  # fmt: skip
