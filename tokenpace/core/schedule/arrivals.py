"""When to send: arrival offsets for open-loop load. Pure and seeded."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

ARRIVALS = ("constant", "poisson", "gamma")


def arrival_offsets_s(
    rate: float, arrival: str, rng: np.random.Generator, burstiness: float = 1.0
) -> Iterator[float]:
    """Endless offsets (seconds from the start) of an arrival process with mean ``rate``/s.

    constant: evenly spaced; poisson: exponential gaps; gamma: gaps with shape ``burstiness``
    (1 = Poisson, < 1 burstier, > 1 smoother), mean gap 1/rate in every case.
    """
    if rate <= 0:
        raise ValueError("rate must be positive")
    if arrival not in ARRIVALS:
        raise ValueError(f"unknown arrival process {arrival!r}; choose from {', '.join(ARRIVALS)}")
    if burstiness <= 0:
        raise ValueError("burstiness must be positive")
    mean_gap = 1.0 / rate
    t = 0.0
    i = 0
    while True:
        if arrival == "constant":
            yield i * mean_gap
            i += 1
            continue
        # Gaps drawn in blocks: one numpy call per 1024 arrivals, not per arrival.
        if arrival == "poisson":
            gaps = rng.exponential(mean_gap, size=1024)
        else:
            gaps = rng.gamma(burstiness, mean_gap / burstiness, size=1024)
        for g in gaps.tolist():  # Python floats, the same values: no numpy scalar per arrival
            yield t
            t += g
