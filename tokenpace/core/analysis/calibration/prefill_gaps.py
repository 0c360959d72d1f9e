"""Do a newcomer's prefills pause the running decodes? Read from the per-token timestamps. Pure.

An engine without mixed batches (vLLM V0 without chunked prefill, older TGI) runs a newcomer's prefill
as a step of its own, and every request decoding meanwhile waits it out: its gap between two tokens
that spans another request's first token is longer than its other gaps by about one prefill step. An
engine that mixes prefills into decode steps (vLLM V1, SGLang, llama.cpp) lengthens that gap only by
the prefill's share of one mixed step.

Per load with requests decoding side by side: the gaps that span another request's first token
against the others, their medians' 95 % distribution-free intervals, and the excess (its bounds:
the spanning gaps' low bound less the others' high bound, and the reverse). The two predictions:
prefill-first, one whole prefill step P of the load's median prompt (TTFT alone less the round
trip); mixed, what the prefill adds to the decode step it joins at the load's batch and context
(StepCosts.joining_prefill: its own work, less the decodes' memory-bound time it hides under).
Where the two lie further apart than the interval is wide: prefill-first when the excess is surely
above their midpoint, mixed when surely below (in the median load); else undecided, with what would
decide (more requests joining running decodes narrow the interval; memory-bound decodes set the two
predictions apart).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from tokenpace.core.analysis.calibration.engine_obs import MeasuredLoad, usable
from tokenpace.core.stats import percentile_ci

MIN_GAPS = 10  # gaps spanning a newcomer's first token a load needs to be evidence
MAX_GAPS = 200_000  # gaps read per load (a bound: the records keep at most their token timestamps)
MIXED, PREFILL_FIRST = "mixed", "prefill_first"


@dataclass(frozen=True, slots=True)
class PrefillGaps:
    chosen: str  # MIXED or PREFILL_FIRST (MIXED, vLLM's, when undecided)
    decided: bool
    note: str


def _gaps(load: MeasuredLoad) -> tuple[np.ndarray, np.ndarray]:
    """(gaps spanning another request's first token, the other gaps), seconds."""
    ok = [r for r in usable(load.records) if len(r.token_ns) >= 2]
    firsts = np.sort(np.asarray([r.first_token_ns for r in ok if r.first_token_ns], dtype=np.int64))
    spanning: list[float] = []
    other: list[float] = []
    for r in ok:
        t = np.asarray(r.token_ns, dtype=np.int64)
        a, b = t[:-1], t[1:]
        # another request's first token inside (a, b]: its prefill ran in this gap
        inside = np.searchsorted(firsts, b, side="right") - np.searchsorted(firsts, a, side="right") > 0
        g = (b - a) / 1e9
        spanning += g[inside].tolist()
        other += g[~inside].tolist()
        if len(spanning) + len(other) >= MAX_GAPS:
            break
    return np.sort(np.asarray(spanning)), np.sort(np.asarray(other))


def prefill_gaps(loads: Sequence[MeasuredLoad], predicted: Mapping[str, tuple[float, float]]) -> PrefillGaps:
    """The verdict over the loads with enough gaps. `predicted`: per load label, the excess in
    seconds that prefill-first and mixed steps predict there (a whole prefill step; what a joining
    prefill adds). Each load's excess is judged against its own midpoint; the median load decides."""
    rows = []  # (excess low, excess high, prefill-first's, mixed's)
    for ld in loads:
        if ld.label not in predicted:
            continue
        s, o = _gaps(ld)
        if len(s) < MIN_GAPS or len(o) < MIN_GAPS:
            continue
        s_lo, s_hi = percentile_ci(s, 50)
        o_lo, o_hi = percentile_ci(o, 50)
        rows.append((s_lo - o_hi, s_hi - o_lo, *predicted[ld.label]))
    if not rows:
        note = (
            "prefill-first steps: not tested, no load had decodes running while newcomers started "
            f"({MIN_GAPS} such gaps or more); a closed loop of 4 users or more would test it"
        )
        return PrefillGaps(MIXED, False, note)
    lo, hi, first, mixed = (float(np.median([r[k] for r in rows])) for k in range(4))
    above = float(np.median([r[0] - 0.5 * (r[2] + r[3]) for r in rows]))
    below = float(np.median([r[1] - 0.5 * (r[2] + r[3]) for r in rows]))
    span = (
        f"a gap that spans a newcomer's first token is {lo * 1e3:+.3g} to {hi * 1e3:+.3g} ms longer than "
        f"the others (95 % bounds, median over {len(rows)} loads); prefill-first predicts "
        f"{first * 1e3:.3g} ms, mixed {mixed * 1e3:.3g} ms"
    )
    if first - mixed <= hi - lo:  # the predictions lie closer than the interval is wide
        note = (
            f"scheduler: undecided, mixed kept (vLLM's default) ({span}): the two predict nearly the same "
            "gap here; loads whose decodes are memory bound (larger batches, a prefill hidden under "
            "their weights' read) would tell them apart"
        )
        return PrefillGaps(MIXED, False, note)
    if above > 0:
        return PrefillGaps(PREFILL_FIRST, True, f"scheduler: prefill-first, decodes pause ({span})")
    if below < 0:
        return PrefillGaps(MIXED, True, f"scheduler: prefills mixed into decode steps ({span})")
    note = (
        f"scheduler: undecided, mixed kept (vLLM's default) ({span}); more requests joining running "
        "decodes (more users, longer steps) would narrow the interval"
    )
    return PrefillGaps(MIXED, False, note)
