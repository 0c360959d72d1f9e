"""Per-request samples of each compared metric, taken from request records. Pure.

Only measured (non-warm-up), successful requests count, as in ``core.metrics.summarize``. ITL gaps
are kept grouped by request: gaps of one stream are correlated, so resampling is over requests.
Each group carries its request's send time: requests sent close in time move together (a queue, a
stall), and the resampler draws them in blocks of time (``evidence.dependence``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from tokenpace.core.metrics import NS_PER_MS, e2e_ns, itl_gaps_ns, tpot_ns, ttft_ns
from tokenpace.core.record import RequestRecord, Status


@dataclass(frozen=True, slots=True)
class MetricInfo:
    name: str
    title: str
    unit: str
    higher_is_better: bool = False


METRICS: dict[str, MetricInfo] = {
    m.name: m
    for m in (
        MetricInfo("ttft", "TTFT", "ms"),
        MetricInfo("tpot", "TPOT", "ms"),
        MetricInfo("itl", "ITL", "ms"),
        MetricInfo("e2e", "E2E", "ms"),
        # Per-request decode throughput, 1000 / TPOT: what one user sees, in output tokens/s.
        MetricInfo("throughput", "throughput", "tok/s", higher_is_better=True),
    )
}


@dataclass(slots=True)
class Samples:
    """One metric's samples: ``groups[i]`` are the values of request i (one value, or its ITL gaps)."""

    groups: list[np.ndarray]
    # send time (ns) of each group's request; None: the groups are already in send order
    sent_ns: np.ndarray | None = None

    def in_send_order(self) -> list[np.ndarray]:
        if self.sent_ns is None or len(self.sent_ns) != len(self.groups):
            return self.groups
        return [self.groups[i] for i in np.argsort(self.sent_ns, kind="stable")]

    @property
    def values(self) -> np.ndarray:
        if not self.groups:
            return np.empty(0)
        return np.concatenate(self.groups)

    @property
    def n(self) -> int:
        return int(sum(len(g) for g in self.groups))

    @property
    def flat(self) -> bool:
        """Every group holds exactly one value (no clustering to respect)."""
        return all(len(g) == 1 for g in self.groups)


def measured_ok(records: Iterable[RequestRecord]) -> list[RequestRecord]:
    return [r for r in records if not r.warmup and r.status is Status.OK]


def _single(ok: Sequence[RequestRecord], values: Iterable[float | None]) -> Samples:
    kept = [(r.sent_ns, v) for r, v in zip(ok, values, strict=True) if v is not None]
    groups = [np.array([v], dtype=np.float64) for _, v in kept]
    return Samples(groups, np.array([t for t, _ in kept], dtype=np.int64))


def metric_samples(records: Sequence[RequestRecord], metric: str) -> Samples:
    """Samples of ``metric`` (a key of METRICS) from a run's records, in the metric's unit."""
    ok = measured_ok(records)
    if metric == "ttft":
        return _single(ok, (None if (t := ttft_ns(r)) is None else t / NS_PER_MS for r in ok))
    if metric == "e2e":
        return _single(ok, (None if (t := e2e_ns(r)) is None else t / NS_PER_MS for r in ok))
    if metric == "tpot":
        return _single(ok, (None if (tp := tpot_ns(r)) is None else tp / NS_PER_MS for r in ok))
    if metric == "throughput":
        return _single(ok, (None if not (tp := tpot_ns(r)) else 1e9 / tp for r in ok))
    if metric == "itl":
        pairs = [(r.sent_ns, np.asarray(itl_gaps_ns(r), dtype=np.float64) / NS_PER_MS) for r in ok]
        kept = [(t, g) for t, g in pairs if len(g)]
        return Samples([g for _, g in kept], np.array([t for t, _ in kept], dtype=np.int64))
    raise KeyError(f"unknown metric {metric!r}; known: {', '.join(METRICS)}")
