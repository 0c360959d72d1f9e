"""Markdown and CSV of the same tables as the HTML report, for people who paste numbers into docs."""

from __future__ import annotations

import csv
import io
import math
from typing import Any

from tokenpace.adapters.report.breakdowns import breakdowns
from tokenpace.adapters.report.plan_lines import plan_lines
from tokenpace.adapters.report.tables import (
    INTERVAL_NOTE,
    LATENCY_METRICS,
    Table,
    conditions_table,
    fmt,
    is_sweep,
    latency_table,
    percentile_points,
    steps_table,
    sweep_conditions,
    throughput_table,
)


def _md_table(t: Table, pct_cols: tuple[str, ...] = ()) -> str:
    headers, rows = t

    def cell(h: str, v: Any) -> str:
        text = f"{v:.1%}" if h in pct_cols and isinstance(v, float) else fmt(v)
        return text.replace("|", "\\|")

    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(cell(h, v) for h, v in zip(headers, r, strict=True)) + " |" for r in rows]
    return "\n".join(lines)


def to_markdown(doc: dict[str, Any]) -> str:
    if is_sweep(doc):
        out = [f"# tokenpace sweep {doc.get('sweep_id', '')}", "", "## Capacity", ""]
        out += [f"- {line}" for line in plan_lines(doc)]
        out += [
            "",
            "## Steps (latency in ms)",
            "",
            _md_table(steps_table(doc, with_ci=True), ("errors",)),
            "",
            INTERVAL_NOTE,
        ]
        shared, per_step = sweep_conditions(doc)
        out += ["", "## Test conditions (every step)", "", _md_table(shared)]
        out += ["", "## Conditions that differ between steps", "", _md_table(per_step)]
        first = None
    else:
        out = [f"# tokenpace run {doc.get('run_id', '')}", ""]
        out += [
            "## Latency",
            "",
            _md_table(latency_table(doc["summary"], with_ci=True)),
            "",
            INTERVAL_NOTE,
            "",
        ]
        out += ["## Throughput", "", _md_table(throughput_table(doc["summary"]))]
        for b in breakdowns(doc["summary"]):
            out += ["", f"## {b.title} (ms)", "", _md_table(b.table())]
        first = doc
    if first is not None:
        out += ["", "## Test conditions", "", _md_table(conditions_table(first))]
    return "\n".join(out) + "\n"


def to_csv(doc: dict[str, Any]) -> str:
    """Sweep: one row per step. Run: long format (section, metric, stat, value)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    if is_sweep(doc):
        headers, rows = steps_table(doc)
        w.writerow(headers)
        for row in rows:
            w.writerow(_cell(v) for v in row)
        return buf.getvalue()
    w.writerow(["section", "metric", "stat", "value"])
    headers, rows = latency_table(doc["summary"])
    key_of = dict(LATENCY_METRICS)
    for row in rows:
        for h, v in zip(headers[1:], row[1:], strict=True):
            w.writerow(["latency_ms", row[0], h, _cell(v)])
        for point in percentile_points(doc["summary"], key_of[row[0]]):
            ci = point["ci95"]
            for side, bound in zip(("low", "high"), ci or (None, None), strict=True):
                shown = "unbounded" if ci and (bound is None or math.isinf(bound)) else _cell(bound)
                w.writerow(["latency_ms", row[0], f"{point['name']}_ci95_{side}", shown])
    for name, value in throughput_table(doc["summary"])[1]:
        w.writerow(["throughput", name, "value", _cell(value)])
    return buf.getvalue()


def _cell(v: Any) -> Any:
    if v is None:
        return ""
    if isinstance(v, float):
        return round(v, 4)
    return v
