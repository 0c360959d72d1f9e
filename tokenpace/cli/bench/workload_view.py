"""Dashboard tables of the workload breakdowns: length bins, turns, cold vs warm prefix (the same
tables as the reports', adapters.report.breakdowns), each percentile with its interval below it."""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text

from tokenpace.app.reports.tables import COLUMNS, Breakdown, breakdowns, interval
from tokenpace.app.reports.tables import fmt as _ms


def _table(b: Breakdown) -> Table:
    table = Table(title=f"{b.title} (ms)", title_justify="left", expand=False, pad_edge=False)
    for name in b.keys:
        table.add_column(name, style="bold", no_wrap=True)
    for name in ("n", "ok", *(c for c, _, _ in COLUMNS)):
        table.add_column(name, justify="right", overflow="fold")  # folded, never cut
    for keys, cell in b.rows:
        points = b.points(cell)
        table.add_row(*keys, str(cell["n"]), str(cell["ok"]), *(_ms(v) for v, _ in points))
        cis = [Text(interval(ci), style="dim") for _, ci in points]  # [low, high]: wraps at its space
        table.add_row(Text("  ci95", style="dim"), *([""] * (len(b.keys) - 1)), "", "", *cis)
    return table


def tables(summary: dict[str, Any]) -> list[Any]:
    """Tables for the breakdowns worth showing (a single length bin is the headline already)."""
    return [_table(b) for b in breakdowns(summary)]
