"""The knee of a load-vs-latency curve. Pure: numbers in, the knee out.

Method (Kneedle, Satopää et al. 2011, for an increasing convex curve), on the sweep's steps in the
order they were run (increasing offered load):

1. Normalise load x (achieved requests/s) and latency y (e.g. TTFT P95) to [0, 1] by their ranges.
2. The difference curve is d_i = x_i' - y_i': how far the normalised curve lies below the diagonal.
3. The knee is the step with the largest d: the most load bought for the least added latency. Past
   it, each further request/s costs more normalised latency than it adds normalised load.

For a flat-then-linear curve that is exactly the break; for a smooth curve it is the point where the
slope equals the curve's average slope over the sweep, so the answer depends on the range swept
(sweep from low load to clearly past saturation). It works when throughput stops growing past
saturation (closed loop): those steps sit at x' near 1 with high y', far from the maximum of d.

The knee is refused (``None`` with a reason) when the sweep has fewer than 3 usable steps, when
latency never rises by ``min_rise`` (default +50 %) over its lowest value (saturation was not
reached: extend the sweep), or when the curve is not convex enough (max d below ``min_distance``).

Why TTFT P95 first: when an engine saturates, new requests wait for a batch slot before their
prefill, and that queueing lands in TTFT before anything else; E2E also grows with the batch size
(TPOT rises smoothly with concurrency), so its curve bends later and softer. Both knees are
computed; capacity planning uses the lower of the two loads.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

METHOD = (
    "kneedle: normalise load and latency to [0,1]; the knee is the step where normalised load minus "
    "normalised latency is largest (most load for the least added latency)"
)
DEFAULT_MIN_RISE = 0.5
DEFAULT_MIN_DISTANCE = 0.05


@dataclass(frozen=True, slots=True)
class Knee:
    index: int  # position in the input sequence
    load: float  # x at the knee (achieved requests/s)
    latency: float  # y at the knee
    distance: float  # Kneedle difference at the knee (0..1): how sharp the bend is
    metric: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "load_rps": self.load,
            "latency_ms": self.latency,
            "distance": self.distance,
            "metric": self.metric,
        }


@dataclass(frozen=True, slots=True)
class KneeResult:
    knee: Knee | None
    reason: str  # why there is no knee, or how it was found

    def to_dict(self) -> dict[str, Any]:
        return {"knee": self.knee.to_dict() if self.knee else None, "reason": self.reason, "method": METHOD}


def find_knee(
    loads: Sequence[float | None],
    latencies: Sequence[float | None],
    metric: str = "",
    min_rise: float = DEFAULT_MIN_RISE,
    min_distance: float = DEFAULT_MIN_DISTANCE,
) -> KneeResult:
    """Kneedle on (load, latency) pairs in sweep order; pairs with a missing value are skipped."""
    if len(loads) != len(latencies):
        raise ValueError("loads and latencies differ in length")
    pts = [
        (i, float(x), float(y))
        for i, (x, y) in enumerate(zip(loads, latencies, strict=True))
        if x is not None and y is not None
    ]
    if len(pts) < 3:
        return KneeResult(None, f"no knee: {len(pts)} usable steps, need at least 3")
    xs = [p[1] for p in pts]
    ys = [p[2] for p in pts]
    y_lo, y_hi = min(ys), max(ys)
    x_lo, x_hi = min(xs), max(xs)
    if y_lo <= 0 or y_hi < y_lo * (1 + min_rise):
        rise = (y_hi / y_lo - 1) * 100 if y_lo > 0 else 0.0
        return KneeResult(
            None,
            f"no knee: {metric or 'latency'} rose only {rise:.0f}% over the sweep (needs "
            f"{min_rise * 100:.0f}%); the load did not reach saturation, extend the sweep",
        )
    if x_hi <= x_lo:
        return KneeResult(None, "no knee: achieved load did not change across the steps")
    best_i, best_d = -1, float("-inf")
    for k, (x, y) in enumerate(zip(xs, ys, strict=True)):
        d = (x - x_lo) / (x_hi - x_lo) - (y - y_lo) / (y_hi - y_lo)
        if d > best_d:
            best_i, best_d = k, d
    if best_d < min_distance:
        return KneeResult(
            None,
            f"no knee: the curve does not bend (largest Kneedle distance {best_d:.2f} < {min_distance})",
        )
    index, x, y = pts[best_i]
    knee = Knee(index=index, load=x, latency=y, distance=best_d, metric=metric)
    return KneeResult(knee, f"knee on {metric or 'latency'} at {x:.3g} req/s (step {index + 1})")


def shape_warnings(
    steps: Sequence[int],
    loads: Sequence[float],
    p50s: Sequence[tuple[float, float, float] | None],
    knee_index: int | None,
    metric: str = "TTFT",
) -> list[str]:
    """What a careful reader would question in a curve ordered by load: a knee on its lowest load
    (latency was high from the start: drift, a cold server or a too-high first step), and latency
    that *fell* while load rose (P50 intervals apart and down by 20 % or more: drift or noise, not
    load). ``p50s``: per step (P50, interval low, interval high) or None."""
    out = []
    order = sorted(range(len(loads)), key=lambda i: loads[i])
    if knee_index is not None and order and knee_index == order[0]:
        out.append(
            f"the knee is on the lowest load tried (step {steps[knee_index]}): latency was high from "
            "the start (drift, a cold server or too high a first step), not bent by load"
        )
    for a, b in itertools.pairwise(order):
        pa, pb = p50s[a], p50s[b]
        if pa is None or pb is None or loads[b] <= loads[a]:
            continue
        if pb[2] < pa[1] and pb[0] < pa[0] * 0.8:
            out.append(
                f"{metric} P50 fell from {pa[0]:.4g} ms (step {steps[a]}) to {pb[0]:.4g} ms (step "
                f"{steps[b]}) while the load rose: latency moved with something other than load"
            )
    return out
