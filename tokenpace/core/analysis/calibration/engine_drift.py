"""Did the engine's decode speed move during the calibration sweep? Pure.

A sweep revisits its first step after its last (`sweep --revisit`): the same load, so the same
time per output token, unless the engine itself got faster or slower meanwhile (another process on
its cores, a CPU's clock). The sweep's own drift check compares TTFT and E2E against the range they
span across its steps, which a concurrency-1 step's decode barely moves; a calibration fits the
step costs of loads run minutes apart, so a move there is a floor under how closely any profile
fitted to them can predict. On llama-server's CI runs the revisit decoded 40 % slower than the
first pass, a minute later, and the held-out loads ran slower still.

Decided by intervals: the 95 % distribution-free intervals of the two passes' median time per
output token (from their ranks) do not overlap. Otherwise undecided, and said so.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tokenpace.core.analysis.calibration.engine_obs import MeasuredLoad, timeline
from tokenpace.core.stats import percentile_ci

MIN_REQUESTS = 10  # per pass: fewer give a median interval too wide to decide anything


@dataclass(frozen=True, slots=True)
class DecodeDrift:
    load: str
    change: float  # median time per output token, revisit over first pass, less 1
    low: float  # the change's bounds from the two medians' 95 % intervals
    high: float
    moved: bool  # the intervals do not overlap
    note: str  # what the calibration says about it


def decode_drift(first: MeasuredLoad, again: MeasuredLoad) -> DecodeDrift:
    """The change of the median time per output token from a load's first pass to its revisit."""
    a, b = _tpot(first), _tpot(again)
    if len(a) < MIN_REQUESTS or len(b) < MIN_REQUESTS:
        nan = float("nan")
        note = (
            f"decode speed at {first.label}: not checked, {len(a)} and {len(b)} requests decoded two or "
            f"more tokens in the first pass and the revisit, fewer than {MIN_REQUESTS} in one of them "
            "(more requests per step would let the revisit say whether the engine moved)"
        )
        return DecodeDrift(first.label, nan, nan, nan, False, note)
    a_lo, a_hi = percentile_ci(a, 50)
    b_lo, b_hi = percentile_ci(b, 50)
    change = float(np.median(b) / np.median(a) - 1)
    low, high = b_lo / a_hi - 1, b_hi / a_lo - 1
    moved = b_lo > a_hi or b_hi < a_lo
    span = f"{change:+.0%} (95 % bounds {low:+.0%} to {high:+.0%})"
    if moved:
        note = (
            f"the engine's decode step moved {span} between {first.label}'s first pass and its revisit "
            "after the sweep's last step: the engine changed speed while it was calibrated, and "
            "predictions hold no closer than that (a quiet host, or pinned cores, would decide more)"
        )
    else:
        note = (
            f"decode speed at {first.label}: revisit {span}, no move decided (undecided below the "
            "bounds' width; more requests per pass would narrow them)"
        )
    return DecodeDrift(first.label, change, low, high, moved, note)


def _tpot(load: MeasuredLoad) -> np.ndarray:
    tl = timeline(load.records)
    if tl is None:
        return np.zeros(0)
    return np.sort((tl.end - tl.first) / (tl.out - 1))
