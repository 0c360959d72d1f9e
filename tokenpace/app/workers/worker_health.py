"""Client health of a multi-process run: every worker's own report, and one verdict over them
(NOT VALID if any worker lagged, stalled, ran out of CPU or died)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tokenpace.app.watch.health import HealthReport


@dataclass
class WorkerHealth:
    worker: int
    pid: int | None
    core: int | None
    requests: int  # records received from it
    chunks: int
    report: HealthReport | None  # None: it died before reporting
    lost: str | None = None  # why it did not finish (died, failed)

    def to_dict(self) -> dict[str, Any]:
        return {
            "worker": self.worker,
            "pid": self.pid,
            "core": self.core,
            "requests": self.requests,
            "chunks": self.chunks,
            "lost": self.lost,
            "health": self.report.to_dict() if self.report is not None else None,
        }


@dataclass
class WorkersHealthReport(HealthReport):
    """The worst worker's numbers (each worker is one process on one core, so the single-process
    limits apply to each), the dispatch lag over every request, and each worker's own report."""

    workers: list[WorkerHealth] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "workers": [w.to_dict() for w in self.workers]}


def combined_health(workers: list[WorkerHealth], dispatch_lags_ms: list[float]) -> WorkersHealthReport:
    reports = [w.report for w in workers if w.report is not None]

    def worst(name: str) -> float | None:
        values = [getattr(r, name) for r in reports if getattr(r, name) is not None]
        return max(values) if values else None

    chunks = sum(w.chunks for w in workers if w.report is not None)
    cpu_us = sum((w.report.cpu_us_per_chunk or 0.0) * w.chunks for w in workers if w.report is not None)
    out = WorkersHealthReport(
        loop_lag_p50_ms=worst("loop_lag_p50_ms"),
        loop_lag_p99_ms=worst("loop_lag_p99_ms"),
        loop_lag_max_ms=worst("loop_lag_max_ms"),
        cpu_fraction=worst("cpu_fraction") or 0.0,
        cpu_us_per_chunk=cpu_us / chunks if chunks else None,
        max_rss_mb=worst("max_rss_mb") or 0.0,
        longest_stall_ms=worst("longest_stall_ms") or 0.0,
        stall_share=worst("stall_share") or 0.0,
        host_load_per_core=worst("host_load_per_core"),
        workers=workers,
    )
    if dispatch_lags_ms:
        out.dispatch_lag_p50_ms = float(np.percentile(dispatch_lags_ms, 50))
        out.dispatch_lag_p99_ms = float(np.percentile(dispatch_lags_ms, 99))
    for w in workers:
        if w.lost:
            out.invalid_reasons.append(f"worker {w.worker} {w.lost}: the load sent was lower than asked")
        if w.report is not None:
            out.invalid_reasons += [f"worker {w.worker}: {r}" for r in w.report.invalid_reasons]
            out.warnings += [f"worker {w.worker}: {r}" for r in w.report.warnings]
    return out
