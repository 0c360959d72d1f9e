"""A metric over a series of runs, and where its level shifted. Pure."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tokenpace.core.analysis.changepoint import (
    DEFAULT_ALPHA,
    DEFAULT_MIN_SIZE,
    DEFAULT_PERMUTATIONS,
    ChangePoint,
    e_divisive,
)

# Distribution metrics, read from the stored summary as summary["<name>_ms"]["pNN"] (or "mean").
DISTRIBUTIONS = ("ttft", "tpot", "itl", "e2e", "ttfat", "queue")
# Whole-run numbers, read as summary[name]; the aliases are what users type.
SCALARS = {
    "throughput": "output_token_throughput",
    "output_token_throughput": "output_token_throughput",
    "request_throughput": "request_throughput",
    "total_token_throughput": "total_token_throughput",
    "goodput": "goodput",
    "error_rate": "error_rate",
}
_DIST = re.compile(r"^([a-z]+)\.(p\d+(?:\.\d+)?|mean)$")


def check_metric(name: str) -> str:
    """The metric name, validated; raises ValueError with the accepted forms."""
    name = name.strip().lower()
    m = _DIST.match(name)
    if (m and m.group(1) in DISTRIBUTIONS and (m.group(2) in ("p50", "p90", "p95", "p99", "mean"))) or (
        name in SCALARS
    ):
        return name
    raise ValueError(
        f"unknown metric {name!r}: use {'|'.join(DISTRIBUTIONS)} with .p50, .p90, .p95, .p99 or .mean "
        f"(e.g. ttft.p95), or one of {', '.join(SCALARS)}"
    )


def summary_value(summary: Mapping[str, Any], metric: str) -> float | None:
    """The value of a checked metric name in a stored run summary (None when the run lacks it)."""
    if metric in SCALARS:
        value = summary.get(SCALARS[metric])
    else:
        base, stat = metric.split(".", 1)
        dist = summary.get(f"{base}_ms") or {}
        value = dist.get(stat) if isinstance(dist, Mapping) else None
    return float(value) if isinstance(value, (int, float)) else None


@dataclass(slots=True)
class Point:
    run_id: str
    started_at: str
    value: float


@dataclass(slots=True)
class History:
    metric: str
    points: list[Point]
    change_points: list[ChangePoint]
    alpha: float
    permutations: int
    min_size: int
    skipped: list[str] = field(default_factory=list)  # runs without a value for the metric

    @property
    def method(self) -> str:
        return (
            f"E-divisive (energy statistic, binary segmentation), each split tested with "
            f"{self.permutations} permutations at level {self.alpha:g}; segments of at least "
            f"{self.min_size} runs. The chance of a false alarm in a series without any shift is at "
            f"most {self.alpha:g}."
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "method": self.method,
            "points": [
                {"run_id": p.run_id, "started_at": p.started_at, "value": p.value} for p in self.points
            ],
            "change_points": [
                cp.to_dict() | {"run_id": self.points[cp.index].run_id} for cp in self.change_points
            ],
            "skipped_runs": self.skipped,
        }


def analyse_history(
    runs: Sequence[tuple[str, str, Mapping[str, Any]]],
    metric: str,
    alpha: float = DEFAULT_ALPHA,
    permutations: int = DEFAULT_PERMUTATIONS,
    min_size: int = DEFAULT_MIN_SIZE,
    seed: int = 0,
) -> History:
    """``runs``: (run id, start time, summary), oldest first."""
    metric = check_metric(metric)
    points, skipped = [], []
    for run_id, started_at, summary in runs:
        value = summary_value(summary, metric)
        if value is None:
            skipped.append(run_id)
        else:
            points.append(Point(run_id, started_at, value))
    cps = e_divisive([p.value for p in points], alpha, permutations, min_size, seed)
    return History(metric, points, cps, alpha, permutations, min_size, skipped)
