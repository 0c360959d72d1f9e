"""What a gray release's judgement gives back (arms, shares, distributions, the decision), the guard
and ladder parsers: the CLI reads them here, so that it imports the app only."""

from __future__ import annotations

from tokenpace.core.analysis.evidence.rates import Share, ShareDiff
from tokenpace.core.analysis.rollout.arms import PROMOTE, ROLL_BACK, ArmsReport
from tokenpace.core.analysis.rollout.guards import parse_guards
from tokenpace.core.analysis.rollout.ladder import DEFAULT_LADDER, parse_ladder
from tokenpace.core.stats import Distribution

__all__ = [
    "DEFAULT_LADDER",
    "PROMOTE",
    "ROLL_BACK",
    "ArmsReport",
    "Distribution",
    "Share",
    "ShareDiff",
    "parse_guards",
    "parse_ladder",
]
