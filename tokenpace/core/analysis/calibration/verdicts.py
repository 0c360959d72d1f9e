"""What a calibration may claim: the fit-quality gate, and a validation's verdicts. Pure.

The gate: a fitted model whose residuals on its own calibration data pass FIT_RESIDUAL_BOUND does not
describe the engine (a launch-bound engine whose step time is flat in the batch, say, is no line in
the batch): its profile is not written unless forced, and a forced one carries the mark.

A validation row compares a predicted percentile with a measured one. Its error interval spans the
prediction's 95 % interval (the replays' spread: one more run's value) against the measured
percentile's distribution-free 95 % interval, so both sides' noise counts:
    low = predicted_low / measured_high - 1,   high = predicted_high / measured_low - 1.
The verdict is the interval's, never the point's:
- *met*: the whole interval within +-tolerance;
- *missed*: the whole interval beyond it (beyond tolerance plus the engine's own decided move,
  where the calibration saw the engine's speed move; a smaller miss is undecided: the engine moved);
- *undecided*, with the reason: too few requests beyond the percentile, a load past what the profile
  was fitted on, an interval wider than the tolerance, or one that straddles it.
A load is met when all its rows are, missed when any is; the profile holds when every load is met,
fails when any is missed; otherwise undecided.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

MET, MISSED, UNDECIDED = "met", "missed", "undecided"
HOLDS, FAILS = "holds", "fails"
DEFAULT_TOLERANCE = 0.10
FIT_RESIDUAL_BOUND = 0.30  # relative RMS of the fitted model on its own calibration data


def fit_problems(residuals: Mapping[str, float], prefill_table: bool) -> list[str]:
    """Why the engine model does not describe this engine (empty: it does, within the bound).

    The prefill line's residual counts only where no measured prefill table replaced the line."""
    problems = []
    decode = float(residuals.get("decode_rel_rms", 0.0))
    if decode > FIT_RESIDUAL_BOUND:
        problems.append(
            f"the decode step misfits by {decode:.0%} RMS (bound {FIT_RESIDUAL_BOUND:.0%}): the step cost "
            "is not a line in the batch for this engine"
        )
    prefill = float(residuals.get("prefill_rel_rms", 0.0))
    if prefill > FIT_RESIDUAL_BOUND and not prefill_table:
        problems.append(f"TTFT alone misfits by {prefill:.0%} RMS (bound {FIT_RESIDUAL_BOUND:.0%})")
    return problems


@dataclass(frozen=True, slots=True)
class RowVerdict:
    verdict: str  # met | missed | undecided
    low_error: float  # the error interval, relative to the measured value
    high_error: float
    reason: str  # why undecided or missed ("" when met)


def judge_row(
    predicted: tuple[float, float],  # the prediction's 95 % interval (ms)
    measured: tuple[float, float],  # the measured percentile's 95 % interval (ms)
    enough: bool,  # enough requests beyond the percentile to bound it
    tolerance: float = DEFAULT_TOLERANCE,
    engine_moved: float = 0.0,  # how far the engine surely moved during the calibration (relative)
    beyond: str = "",  # where the load lies past what the profile was fitted on
    moved_within: str = "",  # the measured load itself: the engine moved during it (engine_drift)
) -> RowVerdict:
    p_lo, p_hi = predicted
    m_lo, m_hi = measured
    lo = p_lo / m_hi - 1 if m_hi > 0 else float("-inf")
    hi = p_hi / m_lo - 1 if m_lo > 0 else float("inf")
    if not enough:
        return RowVerdict(UNDECIDED, lo, hi, "too few requests beyond the percentile to bound it")
    if beyond or moved_within:  # past the profile, or an engine that did not hold still: not judged
        reasons = [f"past what the profile vouches for: {beyond}"] if beyond else []
        reasons += [moved_within] if moved_within else []
        return RowVerdict(UNDECIDED, lo, hi, "; ".join(reasons))
    if -tolerance <= lo and hi <= tolerance:
        return RowVerdict(MET, lo, hi, "")
    if lo > tolerance or hi < -tolerance:
        off = lo if lo > tolerance else -hi
        if engine_moved > 0 and off <= tolerance + engine_moved:
            why = (
                f"the engine's own speed moved {engine_moved:.0%} or more during the calibration: a miss "
                f"within {tolerance + engine_moved:.0%} is not decided"
            )
            return RowVerdict(UNDECIDED, lo, hi, why)
        return RowVerdict(MISSED, lo, hi, f"the whole interval lies beyond {tolerance:.0%}")
    if hi - lo > 2 * tolerance:
        return RowVerdict(UNDECIDED, lo, hi, f"interval wider than the tolerance (+-{tolerance:.0%})")
    return RowVerdict(UNDECIDED, lo, hi, f"interval straddles +-{tolerance:.0%}")


def combine(verdicts: Iterable[str]) -> str:
    """A load's verdict from its rows' (met, missed, undecided)."""
    seen = list(verdicts)
    if seen and all(v == MET for v in seen):
        return MET
    return MISSED if MISSED in seen else UNDECIDED


def profile_verdict(load_verdicts: Iterable[str]) -> str:
    """holds | fails | undecided, from the loads' verdicts."""
    return {MET: HOLDS, MISSED: FAILS, UNDECIDED: UNDECIDED}[combine(load_verdicts)]
