"""What a latency guard at matched load lacks before its percentile can be estimated. Pure.

At matched load the candidate is weighted to the reference's load mix, so an arm's percentile rests
on fewer effective requests than it holds (Kish, ``matched_strata``); the requests outside the
common load bands add none. A percentile needs about ``MIN_TAIL_SAMPLES`` effective requests
beyond it (P95: 100). The arm that lacks most says how many
requests an arm would do, at the window's effective fraction (n_eff / the arm's measured requests),
and how long that is at the window's traffic.
"""

from __future__ import annotations

import math

from tokenpace.core.analysis.rollout.guards import Guard, GuardItem, duration
from tokenpace.core.analysis.rollout.load_match import MATCHED, LoadMatch
from tokenpace.core.analysis.rollout.matched_strata import kish, matched_strata
from tokenpace.core.stats import enough_samples, samples_needed


def matched_effective(match: LoadMatch, metric: str) -> tuple[float, int] | None:
    """The smaller arm's effective samples of ``metric`` at matched load (as ``matched_change``
    weights them) and that arm's measured requests; None unless matched with common bands."""
    if match.state != MATCHED:
        return None
    ref, cand, counts = matched_strata(match.samples(metric), match.common)
    if not counts:
        return None
    shares = [c / sum(counts) for c in counts]  # the reference's load mix
    sizes = kish(ref, shares), kish(cand, shares)
    smaller = 0 if sizes[0] <= sizes[1] else 1
    load = (match.reference, match.candidate)[smaller]
    return sizes[smaller], load.requests + load.missing


def too_few_item(guard: Guard, arm: str, match: LoadMatch | None, span_s: float | None) -> GuardItem | None:
    """The guard's percentile at matched load with too few effective requests on an arm: undecided,
    with the effective count now and needed, the requests an arm that means and the time at the
    window's traffic. None where that is not why it could not be estimated."""
    pct = guard.percentile
    found = matched_effective(match, pct[0]) if match is not None and pct is not None else None
    if pct is None or found is None or found[0] <= 0:
        return None
    n_eff, requests = found
    now, need = int(n_eff), samples_needed(pct[1])
    if enough_samples(now, pct[1]):
        return None
    per_arm = max(math.ceil(need * requests / n_eff), requests + 1)
    reason = (
        f"P{pct[1]:g} needs about {need:,} effective requests an arm at matched load ({now:,} now, "
        f"from {requests:,} requests): about {per_arm:,} requests an arm"
    )
    if span_s is not None and span_s > 0:
        more = span_s * (per_arm / requests - 1)
        reason += f", about {duration(more)} more at this traffic"
    return GuardItem(guard, arm, None, None, "undecided", reason, per_arm, (now, need))
