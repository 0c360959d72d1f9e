"""The report's tables and number format, shared by the console and the files so that both print a
number alike: the CLI reads them here, so that it imports the app only."""

from __future__ import annotations

from tokenpace.adapters.report.breakdowns import COLUMNS, Breakdown, breakdowns
from tokenpace.adapters.report.gpu_lines import gpu_lines
from tokenpace.adapters.report.plan_lines import plan_lines
from tokenpace.adapters.report.tables import fmt, interval, percentile_names, percentile_points, steps_table

__all__ = [
    "COLUMNS",
    "Breakdown",
    "breakdowns",
    "fmt",
    "gpu_lines",
    "interval",
    "percentile_names",
    "percentile_points",
    "plan_lines",
    "steps_table",
]
