"""A gauge's time-mean over a window of readings, with a 95 % interval from batch means. Pure.

Readings a second apart move together (a GPU busy now is busy in a second), so their plain standard
error is too small; the means of consecutive batches are nearer independent, and Student's t over
them gives the interval. Too few readings: no interval, and any decision on it is undecided.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

BATCHES = 10  # a window's mean: its interval from at most this many batch means
T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262)  # Student's t, 1..9 df


@dataclass(frozen=True, slots=True)
class WindowMean:
    """A series' time-mean over a window and its 95 % interval (``ci`` None: fewer than 4 readings)."""

    mean: float | None
    ci: tuple[float, float] | None
    n: int

    def to_dict(self) -> dict[str, Any]:
        return {"mean": self.mean, "ci95": list(self.ci) if self.ci else None, "n": self.n}

    def decide(self, threshold: float) -> str:
        """``above`` or ``below`` the threshold when the interval says so, else ``undecided``."""
        if self.ci is None:
            return "undecided"
        if self.ci[0] > threshold:
            return "above"
        if self.ci[1] < threshold:
            return "below"
        return "undecided"


def window_mean(points: Sequence[Sequence[float]], lo_s: float, hi_s: float) -> WindowMean:
    """The mean of the ``[t_s, value]`` points with lo_s <= t_s <= hi_s."""
    xs = [float(v) for t, v in points if lo_s <= t <= hi_s]
    n = len(xs)
    if not n:
        return WindowMean(None, None, 0)
    mean = sum(xs) / n
    if n < 4:
        return WindowMean(mean, None, n)
    k = min(BATCHES, n // 2)
    size = n / k
    batches = [xs[round(i * size) : round((i + 1) * size)] for i in range(k)]
    means = [sum(b) / len(b) for b in batches]
    centre = sum(means) / k
    sd = math.sqrt(sum((m - centre) ** 2 for m in means) / (k - 1))
    half = T975[k - 2] * sd / math.sqrt(k)
    return WindowMean(mean, (mean - half, mean + half), n)
