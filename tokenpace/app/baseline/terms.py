"""What the baseline library's use cases give back (comparisons, gate items, histories, live-vs-shadow
pairs, the noise between runs, verdicts) and the gate's threshold parser: the CLI reads them here,
so that it imports the app only."""

from __future__ import annotations

from tokenpace.core.analysis.comparison.compare import Comparison
from tokenpace.core.analysis.comparison.gate import GateItem, Threshold, parse_thresholds
from tokenpace.core.analysis.comparison.history import History
from tokenpace.core.analysis.comparison.paired import PairedComparison
from tokenpace.core.analysis.evidence.runnoise import ASSUMED_CENTRE_SD, ASSUMED_TAIL_SD, RunNoise
from tokenpace.core.analysis.evidence.verdict import Verdict

__all__ = [
    "ASSUMED_CENTRE_SD",
    "ASSUMED_TAIL_SD",
    "Comparison",
    "GateItem",
    "History",
    "PairedComparison",
    "RunNoise",
    "Threshold",
    "Verdict",
    "parse_thresholds",
]
