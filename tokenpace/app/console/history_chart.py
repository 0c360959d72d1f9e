"""The history chart: each series its own line (never joined across a change of conditions), each
run's interval as an error bar, NOT VALID runs apart, baselines starred, level shifts as vertical
lines, the gate's threshold as a dashed line from its baseline on."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

from tokenpace.adapters.report.figures import LAYOUT
from tokenpace.app.console.page import Chart

COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22")


def series_names(series: list[dict[str, Any]]) -> list[str]:
    """Each series named by the conditions that tell it from the others."""
    if len(series) < 2:
        return ["this test"] * len(series)
    fields = sorted({k for s in series for k in s["conditions"]})
    differ = [f for f in fields if len({repr(s["conditions"].get(f)) for s in series}) > 1]
    return [", ".join(f"{f}={s['conditions'].get(f)}" for f in differ[:3]) or f"series {i + 1}"
            for i, s in enumerate(series)]  # fmt: skip


def _error(points: list[dict[str, Any]]) -> dict[str, Any]:
    # a side the run could not bound (None) draws no bar; the table says "unbounded"
    up = [(p["ci95"][1] - p["value"]) if p["ci95"] and p["ci95"][1] is not None else 0.0 for p in points]
    down = [(p["value"] - p["ci95"][0]) if p["ci95"] and p["ci95"][0] is not None else 0.0 for p in points]
    return {"type": "data", "symmetric": False, "array": up, "arrayminus": down}


def _draw(fig: go.Figure, s: dict[str, Any], name: str, color: str) -> None:
    valid = [p for p in s["points"] if p["valid"]]
    invalid = [p for p in s["points"] if not p["valid"]]
    fig.add_trace(
        go.Scatter(
            x=[p["started_at"] for p in valid], y=[p["value"] for p in valid], error_y=_error(valid),
            mode="lines+markers", name=name, line={"color": color}, text=[p["run_id"] for p in valid],
        )
    )  # fmt: skip
    if invalid:
        fig.add_trace(
            go.Scatter(
                x=[p["started_at"] for p in invalid], y=[p["value"] for p in invalid], mode="markers",
                name=f"{name}: NOT VALID (left out of the fit)", text=[p["run_id"] for p in invalid],
                marker={"symbol": "x-open", "size": 12, "color": "#7f7f7f"},
            )
        )  # fmt: skip
    based = [p for p in s["points"] if p["baselines"]]
    if based:
        fig.add_trace(
            go.Scatter(
                x=[p["started_at"] for p in based], y=[p["value"] for p in based], mode="markers",
                name=f"{name}: baseline", text=[", ".join(p["baselines"]) for p in based],
                marker={"symbol": "star", "size": 16, "color": color, "line": {"color": "#000", "width": 1}},
            )
        )  # fmt: skip
    for shift in s["shifts"]:
        x = shift["started_at"]
        fig.add_shape(
            type="line", x0=x, x1=x, y0=0, y1=1, yref="paper", line={"color": color, "dash": "dash"}
        )
        size = shift.get("rel_change_mean", shift.get("rel_change"))
        text = f"shift {size:+.0%}" if size is not None else "shift"
        fig.add_annotation(x=x, y=1, yref="paper", text=text, showarrow=False, yanchor="bottom")
    gate = s["gate"]
    if gate and s["points"]:
        fig.add_trace(
            go.Scatter(
                x=[gate["from"], s["points"][-1]["started_at"]], y=[gate["value"], gate["value"]],
                mode="lines", line={"color": "#d62728", "dash": "dot"},
                name=f"{name}: gate threshold (baseline {gate['baseline']} {gate['threshold']:+.0%})",
            )
        )  # fmt: skip


def history_charts(data: dict[str, Any]) -> list[Chart]:
    title = f"{data['metric_name']} over time"
    fig = go.Figure()
    fig.update_layout(title=title, xaxis_title="run started (UTC)", yaxis_title=data["metric_name"], **LAYOUT)
    fig.update_layout(height=460, legend={"orientation": "h", "y": -0.25})
    for i, (s, name) in enumerate(zip(data["series"], series_names(data["series"]), strict=True)):
        _draw(fig, s, name, COLORS[i % len(COLORS)])
    return [Chart(title, fig)]
