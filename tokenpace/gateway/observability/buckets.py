"""Histogram bucket bounds generated from the declared SLOs.

Every SLO threshold is itself a bucket bound, so "share of requests with TTFT <= 800 ms" is an
exact bucket ratio, not an interpolation (vLLM, LiteLLM and OTel default buckets all skip 0.8 s).
Around each threshold the grid is denser, so quantiles near the SLO are read finely.
"""

from __future__ import annotations

from collections.abc import Iterable

# A 1-2-5 ladder; the SLO refinements sit on top of it.
_LADDER = (1.0, 2.0, 5.0)
# Multiples of each threshold added as bounds: fine just around it, where alerts are decided.
_AROUND = (0.25, 0.5, 0.75, 0.9, 1.0, 1.1, 1.25, 1.5, 2.0, 4.0)
# Ladder bounds closer than this (relative) to a threshold-derived bound are dropped: no near-duplicates.
_MIN_REL_GAP = 0.04


def ladder(lo: float, hi: float) -> list[float]:
    """1-2-5 bounds from lo to hi inclusive (both powers of ten times 1, 2 or 5)."""
    out: list[float] = []
    decade = lo
    while decade <= hi * 1.0000001:
        for m in _LADDER:
            v = round(decade * m, 12)
            if lo * 0.9999999 <= v <= hi * 1.0000001:
                out.append(v)
        decade *= 10
    return out


def slo_buckets(thresholds: Iterable[float], lo: float, hi: float) -> tuple[float, ...]:
    """Sorted bounds: a 1-2-5 ladder from lo to hi, densified around and including each threshold."""
    exact = sorted({round(t, 12) for t in thresholds if t > 0})
    refined = {round(t * m, 12) for t in exact for m in _AROUND}
    bounds = set(refined)
    for v in ladder(lo, hi):
        if all(abs(v - r) / r > _MIN_REL_GAP for r in refined):
            bounds.add(v)
    return tuple(sorted(bounds))


def latency_buckets(threshold_s: float | None, lo: float = 0.001, hi: float = 100.0) -> tuple[float, ...]:
    return slo_buckets([threshold_s] if threshold_s else [], lo, hi)


# OTel GenAI advisory buckets for gen_ai.client.token.usage (powers of four).
TOKEN_BUCKETS: tuple[float, ...] = tuple(float(4**i) for i in range(14))
