"""Prefill time as measured, where the roofline's line-plus-curve misfits the TTFT ladder.

Pure. A CPU engine's prefill can bend in ways the roofline has no term for (the tiny model on
llama.cpp: ~0.25 ms per token up to ~150 tokens, ~0.5 beyond 500), so TTFT between the ladder's
steps carries the misfit. When the fit's relative RMS residual over the ladder exceeds
TABLE_THRESHOLD, the calibrated profile carries the ladder itself: at each prompt length the median
TTFT of requests alone in flight less the fixed parts (round trip, step and sequence overheads),
the line's compute where that left no more than the weights' read within twice the step noise (a
memory-bound prefill), made monotone (weighted pool-adjacent-violators: a longer prompt never costs
less), as the mean of one step under the fitted step noise (the ladder's medians are one step's
median: x exp(sigma^2/2)).
A misfit the noise of the medians could make is not one: the threshold is at least twice the RMS
standard error of the ladder's medians (1.2533 x robust sd / sqrt(requests), relative, per length).
The simulator interpolates it (tokenpace.sim.model.step_noise.PrefillTable) and continues past its last
length with the fitted roofline's growth.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from tokenpace.core.analysis.calibration.engine_costs import Param, StepCosts
from tokenpace.core.stats import robust_sd

# Half the 10 % prediction target, and above what medians of 8 requests at a length move by on a
# quiet machine: a smaller misfit is the line's to keep.
TABLE_THRESHOLD = 0.05
MAX_TABLE_POINTS = 64  # lengths kept (a ladder has a handful); the profile file refuses more


def _isotonic(values: list[float], weights: list[float]) -> list[float]:
    """Weighted least-squares non-decreasing fit (pool adjacent violators)."""
    blocks: list[list[float]] = []  # [mean, weight, count]
    for v, w in zip(values, weights, strict=True):
        blocks.append([v, w, 1])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            m2, w2, c2 = blocks.pop()
            m1, w1, c1 = blocks.pop()
            blocks.append([(m1 * w1 + m2 * w2) / (w1 + w2), w1 + w2, c1 + c2])
    out: list[float] = []
    for mean, _, count in blocks:
        out += [mean] * int(count)
    return out


def medians_noise(ttft_by_length: dict[float, list[float]]) -> float:
    """RMS relative standard error of the per-length median TTFTs (lengths with 3 requests or more)."""
    se = []
    for v in ttft_by_length.values():
        arr = np.asarray(v)
        med = float(np.median(arr))
        if len(arr) >= 3 and med > 0:
            se.append(1.2533 * robust_sd(arr) / med / len(arr) ** 0.5)
    return float(np.sqrt(np.mean(np.square(se)))) if se else 0.0


def prefill_table(
    groups: Sequence[tuple[float, float, float]],
    costs: StepCosts,
    residual: float,
    sigma: float,
    ttft_by_length: dict[float, list[float]],
) -> tuple[tuple[float, ...], tuple[float, ...], Param]:
    """(prompt lengths, prefill ms, the note): empty lengths when the line is kept."""
    name = "prefill_table"
    rows = sorted(groups)[:MAX_TABLE_POINTS]
    threshold = max(TABLE_THRESHOLD, 2 * medians_noise(ttft_by_length))
    if residual <= threshold:
        why = (
            f"the line fits the ladder (relative RMS residual {residual:.1%} <= {threshold:.1%}, the larger "
            f"of {TABLE_THRESHOLD:.0%} and twice the medians' own noise)"
        )
        return (), (), Param(name, 0.0, "lengths", False, why)
    if len(rows) < 2 or rows[-1][0] < 1.5 * rows[0][0]:
        why = f"the line misfits ({residual:.1%}) but there is no ladder to tabulate"
        return (), (), Param(name, 0.0, "lengths", False, why)
    fixed = costs.rtt + costs.fixed + costs.per_seq
    mean_of_median = math.exp(0.5 * sigma * sigma)
    # A step is max(compute, memory) and the table prices compute: a length whose prefill alone took
    # no longer than the weights' read (within twice the step noise) was memory-bound, its compute
    # unseen, and as the table's value it would be summed once per prompt when prompts share a step
    # (32 short prompts priced as 32 weight reads): there the fitted line's compute stands in.
    memory_bound = costs.weights * math.exp(2 * sigma)
    raw = [
        max(0.0, t - fixed) * mean_of_median
        if t - fixed > memory_bound
        else costs.per_token * n + costs.per_pair * n * (n + 1) / 2
        for n, t, _ in rows
    ]
    ms = [v * 1e3 for v in _isotonic(raw, [w for _, _, w in rows])]
    how = (
        f"the line misfits the ladder ({residual:.1%} relative RMS > {threshold:.1%}): median TTFT "
        f"alone at {len(rows)} prompt lengths less {fixed * 1e3:.3g} ms of fixed parts, monotone; "
        "interpolated between them, the fitted line beyond the last"
    )
    return tuple(n for n, _, _ in rows), tuple(ms), Param(name, float(len(rows)), "lengths", True, how)
