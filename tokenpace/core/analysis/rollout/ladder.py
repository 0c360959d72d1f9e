"""A gray release's ladder (``1%,5%,25%,50%,100%``) and the split each move asks for. Pure.

The candidate's share of the weight is the position on the ladder; a promote moves to the next rung
above the current share, a roll back sets the candidate to 0 at once (the others keep their weights,
or the reference takes everything when no other arm has weight). A verdict that is not promote or
roll back (hold: undecided, a broken split, too little traffic) moves nothing. With a *baseline* arm
(the old version on replicas of its own, Kayenta's design) the baseline moves with the candidate:
both at the same share (at most half each), the other arms (production) sharing the rest; a roll
back sets both to 0.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass

DEFAULT_LADDER = (1.0, 5.0, 25.0, 50.0, 100.0)
MAX_RUNGS = 32  # a ladder is a handful of steps; more is a typo


@dataclass(frozen=True, slots=True)
class SplitMove:
    """What a move does: weights before and after (by arm), and why."""

    before: dict[str, float]
    after: dict[str, float]
    reason: str

    @property
    def moves(self) -> bool:
        return self.before != self.after


def parse_ladder(text: str) -> tuple[float, ...]:
    """``1%,5%,25%,50%,100%`` -> the percentages, strictly rising, ending at 100 (ValueError)."""
    parts = [p.strip().removesuffix("%") for p in text.split(",") if p.strip()]
    if not parts or len(parts) > MAX_RUNGS:
        raise ValueError(f"--ladder: 1 to {MAX_RUNGS} steps, e.g. 1%,5%,25%,50%,100%")
    try:
        rungs = tuple(float(p) for p in parts)
    except ValueError:
        raise ValueError(f"--ladder {text!r}: each step is a percentage, e.g. 5%") from None
    if any(not 0 < r <= 100 or not math.isfinite(r) for r in rungs):
        raise ValueError(f"--ladder {text!r}: each step between 0 % (excluded) and 100 %")
    if any(b <= a for a, b in itertools.pairwise(rungs)):
        raise ValueError(f"--ladder {text!r}: steps must rise")
    if rungs[-1] != 100:
        raise ValueError(f"--ladder {text!r}: the last step is 100%")
    return rungs


def share_of(weights: Mapping[str, float], arm: str) -> float:
    """The arm's share of the weight, in percent (0 when nothing has weight)."""
    total = sum(w for w in weights.values() if w > 0)
    return 100.0 * max(weights.get(arm, 0.0), 0.0) / total if total > 0 else 0.0


def at_share(
    weights: Mapping[str, float], candidate: str, percent: float, baseline: str | None = None
) -> dict[str, float]:
    """The weights with the candidate at ``percent`` of the total and the other arms sharing the
    rest in their current proportions (all of them equally when every other arm is at 0); a
    ``baseline`` at the candidate's share (at most the rest), or all the rest when it is alone."""
    pinned = {candidate: percent}
    if baseline is not None and baseline != candidate:
        alone = all(a in (candidate, baseline) for a in weights)
        pinned[baseline] = 100.0 - percent if alone else min(percent, 100.0 - percent)
    others = {a: max(w, 0.0) for a, w in weights.items() if a not in pinned}
    if not others and baseline is None:
        return {candidate: 100.0}
    rest = 100.0 - sum(pinned.values())
    total = sum(others.values())
    out = {a: (rest * w / total if total > 0 else rest / len(others)) for a, w in others.items()}
    out.update(pinned)
    return {a: round(out[a], 6) for a in weights}


def next_move(
    verdict: str,
    weights: Mapping[str, float],
    candidate: str,
    ladder: tuple[float, ...],
    baseline: str | None = None,
) -> SplitMove:
    """The move a verdict asks for: ``promote`` -> the next rung above the candidate's share;
    ``roll back`` -> the candidate to 0; anything else -> no move (``moves`` is False)."""
    before = dict(weights)
    if candidate not in before:
        raise ValueError(f"arm {candidate!r} is not in the gateway's split ({', '.join(before)})")
    if baseline is not None and baseline not in before:
        raise ValueError(f"arm {baseline!r} is not in the gateway's split ({', '.join(before)})")
    share = share_of(before, candidate)
    if verdict == "roll back":
        if before[candidate] == 0:
            return SplitMove(before, before, f"{candidate} is at 0 already")
        return SplitMove(before, at_share(before, candidate, 0.0, baseline), f"roll back: {candidate} to 0 %")
    if verdict == "promote":
        above = [r for r in ladder if r > share + 1e-9]
        if not above:
            return SplitMove(before, before, f"{candidate} is at the ladder's top ({share:g} %)")
        reason = f"promote: {candidate} {share:g} % -> {above[0]:g} %"
        return SplitMove(before, at_share(before, candidate, above[0], baseline), reason)
    return SplitMove(before, before, f"{verdict}: nothing moves")
