"""The workload breakdowns (by length bin, by turn, cold vs warm shared prefix) as tables: one
source for the console dashboard and the HTML and Markdown reports. Each percentile comes with its
95 % interval."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tokenpace.adapters.report.tables import Table, fmt, interval

# (column, metric, percentile) shown for every breakdown cell
COLUMNS = (
    ("TTFT P50", "ttft_ms", "p50"),
    ("TTFT P99", "ttft_ms", "p99"),
    ("TPOT P50", "tpot_ms", "p50"),
    ("E2E P50", "e2e_ms", "p50"),
    ("E2E P99", "e2e_ms", "p99"),
)


@dataclass(frozen=True)
class Breakdown:
    title: str  # without the unit: every latency is in ms
    keys: list[str]  # the columns that name a row (input and output bin, turn, prefix state)
    rows: list[tuple[list[str], dict[str, Any]]]  # the row's key cells, its breakdown cell

    def points(self, cell: dict[str, Any]) -> list[tuple[Any, Any]]:
        """(value, [low, high] or None) of each percentile column of one cell."""
        out = []
        for _, metric, p in COLUMNS:
            dist = cell.get(metric) or {}
            out.append((dist.get(p), (dist.get("ci95") or {}).get(p)))
        return out

    def table(self) -> Table:
        """Headers and rows with each percentile as ``value [low, high]`` (HTML, Markdown)."""
        headers = [*self.keys, "n", "ok", *(name for name, _, _ in COLUMNS)]
        rows: list[list[Any]] = []
        for keys, cell in self.rows:
            shown = [f"{fmt(v)} {interval(ci)}".strip() for v, ci in self.points(cell)]
            rows.append([*keys, cell["n"], cell["ok"], *shown])
        return headers, rows


def breakdowns(summary: dict[str, Any]) -> list[Breakdown]:
    """The breakdowns worth showing (a single length bin is the headline already)."""
    b = summary.get("breakdown") or {}
    out: list[Breakdown] = []
    cells = (b.get("length_bins") or {}).get("cells") or []
    if len(cells) > 1:
        rows = [([c["input_bin"], c["output_bin"]], c) for c in cells]
        out.append(Breakdown("By length bin (asked tokens)", ["input", "output"], rows))
    if b.get("turns"):
        rows = [([str(t["turn"]), f"{t['prompt_tokens_mean']:.0f}"], t) for t in b["turns"]]
        out.append(Breakdown("By turn", ["turn", "prompt tok"], rows))
    prefix = b.get("prefix") or {}
    if prefix:
        rows = [([name], prefix[name]) for name in ("cold", "warm") if prefix[name]["n"]]
        out.append(Breakdown("Shared prefix: cold (first use) vs warm", ["prefix"], rows))
    return out
