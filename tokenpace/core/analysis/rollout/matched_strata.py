"""Arms' samples by common load band, and a percentile at the reference's load mix. Pure.

An arm's samples of a metric are taken from its records once (``SampleMemo``), each request's
load band beside them: describing the arm, comparing it, and every band's share read that one.

The candidate is weighted to the reference's share in each band both arms hold (direct
standardisation), so a percentile rests on fewer effective requests than the arm holds (Kish:
n_eff = 1 / sum of the squared weights, summing to 1). One home for that weighting, shared by the
matched change (``load_match``) and what a guard lacks (``sample_size``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from tokenpace.core.analysis.evidence.samples import Samples, samples_and_records
from tokenpace.core.record import RequestRecord
from tokenpace.core.stats import enough_samples

Strata = tuple[list[np.ndarray], list[np.ndarray], list[float]]  # each arm's sorted values, weights
_Z95 = NormalDist().inv_cdf(0.975)


NO_BAND = -1  # a request whose load at dispatch was not recorded


@dataclass(frozen=True, slots=True)
class ArmSamples:
    """An arm's samples of one metric (its measured, OK requests with a value), each group's
    load band (``NO_BAND``: not recorded) and each value's (ITL: a request's gaps share its band)."""

    samples: Samples
    bands: np.ndarray
    values: np.ndarray  # the groups' values, concatenated
    value_bands: np.ndarray

    @classmethod
    def of(cls, records: Sequence[RequestRecord], metric: str, band_of: Callable[[int], int]) -> ArmSamples:
        found, kept = samples_and_records(records, metric)
        load = (r.upstream_inflight for r in kept)
        bands = np.fromiter((NO_BAND if x is None else band_of(x) for x in load), np.int64, len(kept))
        sizes = np.fromiter((len(g) for g in found.groups), np.int64, len(found.groups))
        return cls(found, bands, found.values, np.repeat(bands, sizes))

    def in_band(self, b: int) -> np.ndarray:
        """The values of the requests in load band ``b``, sorted."""
        return np.sort(self.values[self.value_bands == b])

    def of_bands(self, bands: Sequence[int]) -> tuple[Samples, np.ndarray]:
        """The samples of the requests in ``bands``, band by band (each in send order as stored),
        and each group's index into ``bands``."""
        s = self.samples
        picked = [np.flatnonzero(self.bands == b) for b in bands]
        idx = np.concatenate(picked) if picked else np.empty(0, np.int64)
        band_of = np.repeat(np.arange(len(bands), dtype=np.int64), [len(p) for p in picked])
        cluster = [s.cluster[i] for i in idx] if s.cluster is not None else None
        sent = s.sent_ns[idx] if s.sent_ns is not None else np.zeros(len(idx), np.int64)
        found = Samples([s.groups[i] for i in idx], sent, cluster if cluster and any(cluster) else None)
        return found, band_of


class SampleMemo:
    """An arm's ``ArmSamples`` by metric, each taken from its records once (bounded: one a metric).
    ``band_of``: the load band of an in-flight count."""

    __slots__ = ("_band_of", "_memo", "records")

    def __init__(self, records: Sequence[RequestRecord], band_of: Callable[[int], int]) -> None:
        self.records, self._band_of = records, band_of
        self._memo: dict[str, ArmSamples] = {}

    def __call__(self, metric: str) -> ArmSamples:
        if metric not in self._memo:
            self._memo[metric] = ArmSamples.of(self.records, metric, self._band_of)
        return self._memo[metric]


def matched_strata(arms: tuple[ArmSamples, ArmSamples], common: Iterable[int]) -> Strata:
    """Per common band holding both arms' samples: each arm's, sorted, and the reference's count
    (the band's weight)."""
    sides = [[arm.in_band(b) for arm in arms] for b in common]
    held = [(r, c) for r, c in sides if len(r) and len(c)]
    return [r for r, _ in held], [c for _, c in held], [float(len(r)) for r, _ in held]


def kish(strata: Sequence[np.ndarray], shares: Sequence[float]) -> float:
    """The effective sample size of strata weighted by ``shares`` (summing to 1)."""
    return 1.0 / sum(w * w / len(s) for s, w in zip(strata, shares, strict=True))


def _weighted_quantile(values: np.ndarray, weights: np.ndarray, q: float) -> float:
    cum = np.cumsum(weights)
    at = (cum - weights / 2) / cum[-1]
    return float(np.interp(q, at, values))


def percentile_se(
    strata: list[np.ndarray], shares: list[float], q: float
) -> tuple[float, float, float] | None:
    """The weighted percentile of sorted strata with these shares, its SE on the log scale
    (Woodruff), and the effective sample size (Kish). None without enough samples."""
    n_eff = kish(strata, shares)
    if not enough_samples(int(n_eff), q * 100):
        return None
    values = np.concatenate(strata)
    weights = np.concatenate([np.full(len(s), w / len(s)) for s, w in zip(strata, shares, strict=True)])
    order = np.argsort(values, kind="stable")
    values, weights = values[order], weights[order]
    x = _weighted_quantile(values, weights, q)
    var = sum(
        w**2 * p * (1 - p) / len(s)
        for s, w in zip(strata, shares, strict=True)
        for p in [(float(np.searchsorted(s, x, "right")) + 0.5) / (len(s) + 1)]
    )
    half = _Z95 * math.sqrt(var)
    lo = _weighted_quantile(values, weights, max(q - half, 0.0))
    hi = _weighted_quantile(values, weights, min(q + half, 1.0))
    if not (x > 0 and lo > 0 and hi > 0):
        return None
    return x, (math.log(hi) - math.log(lo)) / (2 * _Z95), n_eff
