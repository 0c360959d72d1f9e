"""What a gray release's judgement gives back (arms, shares, distributions, the decision) and the guard
parser: the CLI reads them here, so that it imports the app only."""

from __future__ import annotations

from tokenpace.core.analysis.evidence.rates import Share, ShareDiff
from tokenpace.core.analysis.rollout.arms import PROMOTE, ROLL_BACK, ArmsReport
from tokenpace.core.analysis.rollout.guards import parse_guards
from tokenpace.core.stats import Distribution

__all__ = ["PROMOTE", "ROLL_BACK", "ArmsReport", "Distribution", "Share", "ShareDiff", "parse_guards"]
