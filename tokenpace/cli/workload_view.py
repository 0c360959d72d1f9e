"""Dashboard tables of the workload breakdowns: length bins, turns, cold vs warm prefix."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from tokenpace.adapters.report.tables import fmt as _ms


def _table(title: str, first: list[str], rows: list[tuple[list[str], dict[str, Any]]]) -> Table:
    table = Table(title=title, title_justify="left", expand=False, pad_edge=False)
    for name in first:
        table.add_column(name, style="bold", no_wrap=True)
    for name in ("n", "ok", "TTFT P50", "TTFT P99", "TPOT P50", "E2E P50", "E2E P99"):
        table.add_column(name, justify="right", max_width=9)
    for keys, cell in rows:
        ttft, tpot, e2e = cell["ttft_ms"], cell["tpot_ms"], cell["e2e_ms"]
        table.add_row(
            *keys,
            str(cell["n"]),
            str(cell["ok"]),
            _ms(ttft["p50"]),
            _ms(ttft["p99"]),
            _ms(tpot["p50"]),
            _ms(e2e["p50"]),
            _ms(e2e["p99"]),
        )
    return table


def tables(summary: dict[str, Any]) -> list[Any]:
    """Tables for the breakdowns worth showing (a single length bin is the headline already)."""
    b = summary.get("breakdown") or {}
    out: list[Any] = []
    cells = (b.get("length_bins") or {}).get("cells") or []
    if len(cells) > 1:
        rows = [([c["input_bin"], c["output_bin"]], c) for c in cells]
        out.append(_table("By length bin (asked tokens, ms)", ["input", "output"], rows))
    if b.get("turns"):
        rows = [([str(t["turn"]), f"{t['prompt_tokens_mean']:.0f}"], t) for t in b["turns"]]
        out.append(_table("By turn (ms)", ["turn", "prompt tok"], rows))
    prefix = b.get("prefix") or {}
    if prefix:
        rows = [([name], prefix[name]) for name in ("cold", "warm") if prefix[name]["n"]]
        out.append(_table("Shared prefix: cold (first use) vs warm (ms)", ["prefix"], rows))
    return out
