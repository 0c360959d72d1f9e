"""Per-request samples of each compared metric, taken from request records. Pure.

Only measured (non-warm-up), successful requests count, as in ``core.metrics.summarize``. ITL gaps
are kept grouped by request: gaps of one stream are correlated, so resampling is over requests.
Each group carries its request's send time: requests sent close in time move together (a queue, a
stall), and the resampler draws them in blocks of time (``evidence.dependence``). Each group also
carries its request's user or session (``cluster_key``), whose requests may move together instead.
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
    # each group's user or session ("" where the request had none); None: no such keys
    cluster: list[str] | None = None

    def _order(self) -> np.ndarray | None:
        if self.sent_ns is None or len(self.sent_ns) != len(self.groups):
            return None
        out: np.ndarray = np.argsort(self.sent_ns, kind="stable")
        return out

    def in_send_order(self) -> list[np.ndarray]:
        order = self._order()
        return self.groups if order is None else [self.groups[i] for i in order]

    def clusters_in_send_order(self) -> tuple[str, np.ndarray] | None:
        """(what the keys are, an integer id per group in send order), where some key is shared by
        two or more groups; a group without one is a cluster of its own."""
        if self.cluster is None or len(self.cluster) != len(self.groups) or not any(self.cluster):
            return None
        order = self._order()
        keys = self.cluster if order is None else [self.cluster[i] for i in order]
        named = sorted({k for k in keys if k})
        if len(named) == sum(1 for k in keys if k):
            return None  # every key once (a user per request): nothing moves together by key
        ids = {k: i for i, k in enumerate(named)}
        loose = iter(range(len(named), len(named) + len(keys)))
        codes = np.array([ids[k] if k else next(loose) for k in keys], dtype=np.int64)
        kind = " or ".join(sorted({k.split(":", 1)[0] for k in named}))
        return kind, codes

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


def cluster_key(record: RequestRecord) -> str:
    """The unit whose requests may move together: the gateway's user, else the workload's session
    (its turns share a growing context), else a "session" label; "" when none."""
    if user := record.labels.get("user"):
        return f"user:{user}"
    if record.session is not None:
        return f"session:{record.session}"
    if session := record.labels.get("session"):
        return f"session:{session}"
    return ""


def measured_ok(records: Iterable[RequestRecord]) -> list[RequestRecord]:
    return [r for r in records if not r.warmup and r.status is Status.OK]


def _single(
    ok: Sequence[RequestRecord], values: Iterable[float | None]
) -> tuple[Samples, list[RequestRecord]]:
    kept = [(r, v) for r, v in zip(ok, values, strict=True) if v is not None]
    groups = [np.array([v], dtype=np.float64) for _, v in kept]
    records = [r for r, _ in kept]
    return Samples(groups, np.array([r.sent_ns for r in records], dtype=np.int64), _keys(records)), records


def _keys(records: Iterable[RequestRecord]) -> list[str] | None:
    keys = [cluster_key(r) for r in records]
    return keys if any(keys) else None


def metric_samples(records: Sequence[RequestRecord], metric: str) -> Samples:
    """Samples of ``metric`` (a key of METRICS) from a run's records, in the metric's unit."""
    return samples_and_records(records, metric)[0]


def samples_and_records(records: Sequence[RequestRecord], metric: str) -> tuple[Samples, list[RequestRecord]]:
    """``metric_samples`` and the record of each group (measured, OK, with a value of it)."""
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
        pairs = [(r, np.asarray(itl_gaps_ns(r), dtype=np.float64) / NS_PER_MS) for r in ok]
        kept = [(r, g) for r, g in pairs if len(g)]
        recs = [r for r, _ in kept]
        found = Samples(
            [g for _, g in kept], np.array([r.sent_ns for r in recs], dtype=np.int64), _keys(recs)
        )
        return found, recs
    raise KeyError(f"unknown metric {metric!r}; known: {', '.join(METRICS)}")
