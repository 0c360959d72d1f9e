"""The cost model's two measured terms (tokenpace.sim.model.costmodel), off unless a profile sets them.

StepNoise: step-time variability. A real engine's steps vary (a CPU engine's thread loses its core,
a GPU's clocks move), and the tails of TTFT and TPOT come from that. Each step's duration is multiplied
by a lognormal factor of mean 1 and coefficient of variation `step_cv`. With `step_cv_hold_ms` > 0
the factor's log is an Ornstein-Uhlenbeck process in simulated time (correlation time hold): a slow
stretch lasts, as it does when another process holds the core; 0 draws each step independently. The
draws come from their own seeded stream, so a run stays reproducible and the engine's other draws
(output lengths) are unchanged.

PrefillTable: prefill time against prompt length as measured (a calibration's TTFT ladder), where the
roofline's line-plus-curve does not fit. A monotone piecewise-linear G(n), G(0) = 0, interpolated
between the ladder's lengths and continued past the last one by the fitted roofline's growth; a chunk
of n tokens after `start` cached ones costs G(start + n) - G(start).
"""

from __future__ import annotations

import math
import random
from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

_NOISE_STREAM = 0x5EED_C057  # mixed into the seed: the noise's own stream


@dataclass(slots=True)
class StepNoise:
    sigma: float  # of the factor's log
    hold_s: float  # correlation time; 0 = independent steps
    rng: random.Random
    x: float = 0.0  # the current standard-normal state

    @classmethod
    def of(cls, cv: float, hold_ms: float, seed: int) -> StepNoise | None:
        if cv <= 0:
            return None
        rng = random.Random(seed ^ _NOISE_STREAM)
        return cls(math.sqrt(math.log1p(cv * cv)), max(0.0, hold_ms) / 1e3, rng, rng.gauss(0.0, 1.0))

    def factor(self, dt: float) -> float:
        """The multiplier of a step of (typical) duration dt; mean 1 over many steps."""
        z = self.rng.gauss(0.0, 1.0)
        if self.hold_s > 0:
            rho = math.exp(-dt / self.hold_s)
            self.x = rho * self.x + math.sqrt(1.0 - rho * rho) * z
        else:
            self.x = z
        s = self.sigma
        return math.exp(s * self.x - 0.5 * s * s)


@dataclass(slots=True)
class PrefillTable:
    tokens: list[float]  # 0 first, increasing
    seconds: list[float]  # G at those lengths, non-decreasing
    beyond: Callable[[float], float]  # the roofline's prefill time, for lengths past the last
    _last: float = field(init=False)

    def __post_init__(self) -> None:
        self._last = self.beyond(self.tokens[-1])

    @classmethod
    def of(
        cls, tokens: Sequence[float], ms: Sequence[float], beyond: Callable[[float], float]
    ) -> PrefillTable | None:
        """The table, or None when there is none (the profile loader checked the lengths match)."""
        if not tokens:
            return None
        n, t = [0.0], [0.0]
        for x, y in sorted(zip(tokens, ms, strict=True)):
            if x > n[-1]:
                n.append(float(x))
                t.append(max(t[-1], float(y) / 1e3))  # monotone: a longer prompt never costs less
        return cls(n, t, beyond)

    def at(self, x: float) -> float:
        """G(x): seconds to prefill x tokens from scratch."""
        n, t = self.tokens, self.seconds
        if x >= n[-1]:
            return t[-1] + self.beyond(x) - self._last
        i = bisect_right(n, x)
        return t[i - 1] + (t[i] - t[i - 1]) * (x - n[i - 1]) / (n[i] - n[i - 1])

    def chunks_seconds(self, chunks: list[tuple[int, int]]) -> float:
        at = self.at
        return sum(at(s + k) - at(s) for s, k in chunks)
