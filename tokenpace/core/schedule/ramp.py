"""Ramp-up: the load raised over time instead of all at once. Pure and seeded.

- a rate ramp (open loop): the arrival rate goes from ``start_rps`` to ``end_rps``, linearly or
  exponentially, either over ``duration_s`` and then holds at ``end_rps``, or, as `vllm bench serve
  --ramp-up-strategy` does, over every request of the run (request i at progress i / (N - 1));
- a user ramp (closed loop): the users join one after another over ``duration_s`` (linear: evenly;
  exponential: doubling, 1, 2, 4, ... users in equal steps of time).
The ramp is no steady load: core.steady leaves it out of the steady window.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

RAMP_STRATEGIES = ("linear", "exponential")


@dataclass(frozen=True, slots=True)
class Ramp:
    strategy: str  # linear | exponential
    duration_s: float | None = None  # None: over the whole run (a rate ramp only, as vLLM)
    start_rps: float | None = None  # a rate ramp; None: a user ramp
    end_rps: float | None = None

    @property
    def of_rate(self) -> bool:
        return self.start_rps is not None

    def validate(self) -> None:
        if self.strategy not in RAMP_STRATEGIES:
            raise ValueError(f"ramp-up strategy {self.strategy!r}: choose linear or exponential")
        if self.duration_s is not None and not (self.duration_s > 0 and math.isfinite(self.duration_s)):
            raise ValueError("--ramp-up must be a positive duration")
        if self.of_rate:
            start, end = self.start_rps or 0.0, self.end_rps or 0.0
            if not (0 < start <= end and math.isfinite(end)):
                raise ValueError(
                    "--ramp-up-start-rps and --ramp-up-end-rps: give 0 < start <= end (a rate of 0 "
                    "would never send)"
                )
        elif self.duration_s is None:
            raise ValueError("a ramp of users needs --ramp-up DURATION (how long the users take to join)")

    def rate_at(self, progress: float) -> float:
        """The rate at ``progress`` (0 to 1) through the ramp."""
        start, end = float(self.start_rps or 0.0), float(self.end_rps or 0.0)
        p = min(max(progress, 0.0), 1.0)
        if self.strategy == "linear":
            return start + (end - start) * p
        return float(start * (end / start) ** p)

    @property
    def excluded_s(self) -> float:
        """How long after the first send the ramp lasts (inf: the whole run is a ramp)."""
        return self.duration_s if self.duration_s is not None else math.inf

    def to_dict(self) -> dict[str, Any]:
        return {
            "strategy": self.strategy,
            "of": "rate" if self.of_rate else "users",
            "duration_s": self.duration_s,
            "over": "duration" if self.duration_s is not None else "every request",
            "start_rps": self.start_rps,
            "end_rps": self.end_rps,
        }


def ramp_offsets_s(
    ramp: Ramp, total: int, rng: np.random.Generator, burstiness: float = 1.0
) -> Iterator[float]:
    """Endless send offsets (s) of a rate ramp; gaps are gamma with shape ``burstiness`` (1: Poisson)
    and mean 1/rate at the rate of the moment (by time) or of the request's place (by request)."""
    t = 0.0
    i = 0
    while True:
        yield t
        if ramp.duration_s is not None:
            rate = ramp.rate_at(t / ramp.duration_s)
        else:
            rate = ramp.rate_at(i / max(total - 1, 1))
        t += float(rng.gamma(burstiness, 1.0 / (rate * burstiness)))
        i += 1


def user_start_offsets_s(ramp: Ramp, users: int) -> list[float]:
    """When each of ``users`` joins (s from the start) in a user ramp over ``ramp.duration_s``."""
    span = ramp.duration_s or 0.0
    if users <= 1:
        return [0.0] * users
    if ramp.strategy == "linear":
        return [span * k / users for k in range(users)]
    steps = math.log2(users)
    return [span * math.floor(math.log2(k + 1)) / steps for k in range(users)]
