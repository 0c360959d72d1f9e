"""A metric over a series of runs, and where its level shifted. Pure."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from statistics import NormalDist
from typing import Any

import numpy as np

from tokenpace.core.analysis.evidence.changepoint import (
    DEFAULT_ALPHA,
    DEFAULT_MIN_SIZE,
    DEFAULT_PERMUTATIONS,
    ChangePoint,
    e_divisive,
)
from tokenpace.core.analysis.evidence.runnoise import POWER, t_quantile

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
_DIST = re.compile(r"^([a-z][a-z0-9]*)\.(p\d+(?:\.\d+)?|mean)$")


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


DEFAULT_MIN_SHIFT = 0.05  # a level change smaller than this is within what reruns wobble


@dataclass(frozen=True, slots=True)
class ShiftSize:
    """The relative change of the segment means at a change point, with its interval: the spread of
    the runs inside each segment is the noise between runs (Welch's t on log values)."""

    rel: float
    lo: float
    hi: float

    def to_dict(self) -> dict[str, float]:
        return {"rel_change_mean": self.rel, "rel_ci_low": self.lo, "rel_ci_high": self.hi}


@dataclass(slots=True)
class History:
    metric: str
    points: list[Point]
    change_points: list[ChangePoint]  # level shifts: the interval of their size clears min_shift
    alpha: float
    permutations: int
    min_size: int
    skipped: list[str] = field(default_factory=list)  # runs without a value for the metric
    min_shift: float = DEFAULT_MIN_SHIFT
    sizes: dict[int, ShiftSize] = field(default_factory=dict)  # change point index -> its size
    minor: list[ChangePoint] = field(default_factory=list)  # found, but not shown beyond min_shift
    detectable: float | None = None  # smallest shift called 9 times in 10, split in the middle

    @property
    def method(self) -> str:
        return (
            f"E-divisive (energy statistic, binary segmentation), each split tested with "
            f"{self.permutations} permutations at level {self.alpha:g}; segments of at least "
            f"{self.min_size} runs. The chance of a false alarm in a series without any shift is at "
            f"most {self.alpha:g}. A split is called a level shift only when the "
            f"{100 * (1 - self.alpha):g}% interval of its size (segment means; the runs' spread inside "
            f"each segment is the noise between runs) lies beyond +-{self.min_shift:.0%}; smaller or "
            f"undecided ones are listed as minor."
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "method": self.method,
            "points": [
                {"run_id": p.run_id, "started_at": p.started_at, "value": p.value} for p in self.points
            ],
            "min_shift": self.min_shift,
            "detectable_shift": self.detectable,
            "change_points": [self._point(cp) for cp in self.change_points],
            "minor_changes": [self._point(cp) for cp in self.minor],
            "skipped_runs": self.skipped,
        }

    def _point(self, cp: ChangePoint) -> dict[str, Any]:
        size = self.sizes.get(cp.index)
        return cp.to_dict() | {"run_id": self.points[cp.index].run_id} | (size.to_dict() if size else {})


def analyse_history(
    runs: Sequence[tuple[str, str, Mapping[str, Any]]],
    metric: str,
    alpha: float = DEFAULT_ALPHA,
    permutations: int = DEFAULT_PERMUTATIONS,
    min_size: int = DEFAULT_MIN_SIZE,
    seed: int = 0,
    min_shift: float = DEFAULT_MIN_SHIFT,
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
    values = np.array([p.value for p in points], dtype=np.float64)
    cps = e_divisive(values, alpha, permutations, min_size, seed)
    hist = History(metric, points, [], alpha, permutations, min_size, skipped, min_shift)
    bounds = [0, *(cp.index for cp in cps), len(values)]
    for i, cp in enumerate(cps, start=1):
        size = shift_size(values[bounds[i - 1] : cp.index], values[cp.index : bounds[i + 1]], alpha)
        if size is not None:
            hist.sizes[cp.index] = size
        clears = size is not None and (size.lo > min_shift or size.hi < -min_shift)
        (hist.change_points if clears else hist.minor).append(cp)
    hist.detectable = detectable_shift(values, bounds, alpha, min_shift)
    return hist


def detectable_shift(values: np.ndarray, bounds: list[int], alpha: float, min_shift: float) -> float | None:
    """The smallest level shift this history would call 9 times in 10 at its best (a split in the
    middle), with the runs' spread inside its segments as the noise between runs."""
    segments = [np.log(values[s:e]) for s, e in pairwise(bounds) if e - s >= 2 and np.all(values[s:e] > 0)]
    df = sum(len(x) - 1 for x in segments)
    if df < 2 or len(values) < 4:
        return None
    var = sum(float(np.sum((x - x.mean()) ** 2)) for x in segments) / df
    se = math.sqrt(var * 4 / len(values))  # two halves of the series
    reach = (t_quantile(1 - alpha / 2, df) + NormalDist().inv_cdf(POWER)) * se
    return math.exp(math.log(1 + min_shift) + reach) - 1


def shift_size(before: np.ndarray, after: np.ndarray, alpha: float) -> ShiftSize | None:
    """after/before - 1 of the segment means, with a Welch interval on the log scale."""
    if len(before) < 2 or len(after) < 2 or np.any(before <= 0) or np.any(after <= 0):
        return None
    lb, la = np.log(before), np.log(after)
    vb, va = float(np.var(lb, ddof=1)) / len(lb), float(np.var(la, ddof=1)) / len(la)
    se = math.sqrt(vb + va)
    df = (vb + va) ** 2 / (vb**2 / (len(lb) - 1) + va**2 / (len(la) - 1)) if se > 0 else math.inf
    t = t_quantile(1 - alpha / 2, df)
    d = float(la.mean() - lb.mean())
    return ShiftSize(math.exp(d) - 1, math.exp(d - t * se) - 1, math.exp(d + t * se) - 1)
