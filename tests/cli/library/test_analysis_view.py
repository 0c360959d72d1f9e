"""The compare view's line of what would decide its undecided rows."""

from __future__ import annotations

from tokenpace.cli.library.analysis_view import undecided_line
from tokenpace.core.analysis.comparison.compare import Comparison, MetricResult, PercentileRow
from tokenpace.core.analysis.evidence.verdict import Verdict


def test_an_undecided_row_resting_on_requests_that_moved_together_says_what_would_decide() -> None:
    note = "side A holds 18 effective requests of 123 (requests moved together): more runs would decide"
    moved = PercentileRow("ttft", "p95", 123, 117, 1, 2, 1, None, 1.0, None, None, Verdict.UNDECIDED)
    moved.dependence_note = note
    close = PercentileRow("ttft", "p50", 123, 117, 1, 2, 1, None, 1.0, None, None, Verdict.UNDECIDED)
    close.runs_needed = 3
    metric = MetricResult(
        "ttft", "TTFT", "ms", False, 123, 117, None, None, Verdict.UNDECIDED, [close, moved]
    )
    line = undecided_line(Comparison(0.05, 0.05, [metric]))
    assert line is not None and f"ttft.p95 ({note})" in line and "ttft.p50 (about 3 runs a side)" in line
