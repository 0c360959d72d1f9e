"""Plotly figures of a run or a sweep: curves against load, distributions, timelines, errors.

Plain SVG traces only (no WebGL), so the report renders anywhere, headless browsers included.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio

from tokenpace.adapters.report.tables import load_label, steady_rps
from tokenpace.core.metrics import e2e_ns, tpot_ns, ttft_ns
from tokenpace.core.record import FAILURE_STATUSES, RequestRecord, Status

MAX_POINTS = 20_000  # per trace; more are thinned evenly (the file stays small enough to open)
# plotly_white's layout and the defaults of the traces drawn here: the same look, at half the cost
# of setting the whole template (defaults for every trace type) on every figure (the web console)
_WHITE = pio.templates["plotly_white"]
pio.templates["tokenpace"] = go.layout.Template(
    layout=_WHITE.layout,
    data={"bar": _WHITE.data.bar, "histogram": _WHITE.data.histogram, "scatter": _WHITE.data.scatter},
)
LAYOUT = {"template": "tokenpace", "height": 380, "margin": {"l": 60, "r": 20, "t": 50, "b": 50}}


@dataclass
class Step:
    """One run of the report: its result dict and its records (empty when the file is missing)."""

    label: str
    result: dict[str, Any]
    records: list[RequestRecord]


def make_steps(results: Sequence[dict[str, Any]], records: Sequence[list[RequestRecord]]) -> list[Step]:
    return [Step(load_label(r), r, list(recs)) for r, recs in zip(results, records, strict=True)]


def _thin(values: list[Any]) -> list[Any]:
    if len(values) <= MAX_POINTS:
        return values
    idx = np.linspace(0, len(values) - 1, MAX_POINTS).astype(int)
    return [values[i] for i in idx]


def _fig(title: str, xaxis: str, yaxis: str) -> go.Figure:
    fig = go.Figure()
    fig.update_layout(title=title, xaxis_title=xaxis, yaxis_title=yaxis, **LAYOUT)
    return fig


def _ms(records: list[RequestRecord], metric: str) -> list[float]:
    fn = {"ttft": ttft_ns, "tpot": tpot_ns, "e2e": e2e_ns}[metric]
    out = []
    for r in records:
        if r.warmup or r.status is not Status.OK:
            continue
        v = fn(r)
        if v is not None:
            out.append(v / 1e6)
    return out


# --- curves against load (sweeps) -------------------------------------------------------------


def _marks(fig: go.Figure, sweep: dict[str, Any], slo_key: str | None) -> None:
    knee = (sweep.get("analysis") or {}).get("knee")
    plan = sweep.get("plan") or {}
    if knee:
        fig.add_vline(x=knee["load_rps"], line_dash="dash", line_color="#d62728", annotation_text="knee")
    if plan.get("watermark_rps_per_replica"):
        fig.add_vline(
            x=plan["watermark_rps_per_replica"],
            line_dash="dot",
            line_color="#2ca02c",
            annotation_text="safe watermark",
            annotation_position="bottom right",
        )
    limit = (sweep.get("slo") or {}).get(slo_key) if slo_key else None
    if limit:
        fig.add_hline(y=limit, line_dash="dot", line_color="#9467bd", annotation_text=f"SLO {limit:g} ms")


def _left_out(sweep: dict[str, Any]) -> dict[int, str]:
    """0-based index of each step left out of every figure -> why (the analysis's reasons)."""
    items = (sweep.get("analysis") or {}).get("left_out_steps") or []
    return {item["step"] - 1: ", ".join(item["reasons"]) for item in items}


def _counted(values: list[Any], left: dict[int, str]) -> list[Any]:
    """The values of the steps that count; left-out ones break the line (drawn apart, see below)."""
    return [None if i in left else v for i, v in enumerate(values)]


def _mark_left_out(fig: go.Figure, xs: list[Any], ys: list[Any], left: dict[int, str]) -> None:
    if not left:
        return
    fig.add_trace(
        go.Scatter(
            x=[xs[i] for i in left], y=[ys[i] for i in left], mode="markers",
            marker={"symbol": "x-open", "size": 11, "color": "#7f7f7f"},
            name="left out (not in any figure)", text=[f"step {i + 1}: {why}" for i, why in left.items()],
        )
    )  # fmt: skip


def latency_curve(sweep: dict[str, Any], metric: str, name: str) -> go.Figure:
    steps = sweep["steps"]
    left = _left_out(sweep)
    xs = [steady_rps(s["summary"]) for s in steps]
    fig = _fig(f"{name} vs load", "achieved load (requests/s, steady window)", f"{name} (ms)")
    for p in ("p50", "p95", "p99"):
        ys = [(s["summary"].get(metric) or {}).get(p) for s in steps]
        fig.add_trace(
            go.Scatter(
                x=xs, y=_counted(ys, left), mode="lines+markers", name=f"{name} {p.upper()}",
                text=[load_label(s) for s in steps],
            )
        )  # fmt: skip
    _mark_left_out(fig, xs, [(s["summary"].get(metric) or {}).get("p95") for s in steps], left)
    _marks(fig, sweep, metric)
    return fig


def throughput_curve(sweep: dict[str, Any]) -> go.Figure:
    steps = sweep["steps"]
    left = _left_out(sweep)
    labels = [load_label(s) for s in steps]
    fig = _fig("Throughput and goodput per step", "step (offered load)", "requests/s")
    rps = [steady_rps(s["summary"]) for s in steps]
    fig.add_trace(
        go.Scatter(x=labels, y=_counted(rps, left),
                   mode="lines+markers", name="requests/s (ok, steady window)")
    )  # fmt: skip
    _mark_left_out(fig, labels, rps, left)
    good = [s["summary"].get("goodput") for s in steps]
    if any(g is not None for g in good):
        fig.add_trace(
            go.Scatter(x=labels, y=_counted(good, left), mode="lines+markers", name="goodput (met SLO)")
        )
    fig.add_trace(
        go.Bar(x=labels, y=[s["summary"].get("output_token_throughput") for s in steps],
               name="output tokens/s", yaxis="y2", opacity=0.3)
    )  # fmt: skip
    fig.update_layout(yaxis2={"title": "output tokens/s", "overlaying": "y", "side": "right"})
    plan = sweep.get("plan") or {}
    if plan.get("watermark_rps_per_replica"):
        fig.add_hline(
            y=plan["watermark_rps_per_replica"], line_dash="dot", line_color="#2ca02c",
            annotation_text="safe watermark",
        )  # fmt: skip
    return fig


# --- distributions ----------------------------------------------------------------------------


def cdf(steps: list[Step], metric: str, name: str) -> go.Figure:
    fig = _fig(f"{name} CDF", f"{name} (ms)", "fraction of requests")
    for st in steps:
        v = np.sort(np.asarray(_ms(st.records, metric)))
        if len(v) == 0:
            continue
        y = np.arange(1, len(v) + 1) / len(v)
        fig.add_trace(go.Scatter(x=_thin(v.tolist()), y=_thin(y.tolist()), mode="lines", name=st.label))
    return fig


def histogram(steps: list[Step], metric: str, name: str) -> go.Figure:
    fig = _fig(f"{name} histogram", f"{name} (ms)", "requests")
    for st in steps:
        v = _ms(st.records, metric)
        if v:
            fig.add_trace(go.Histogram(x=_thin(v), name=st.label, opacity=0.6, nbinsx=50))
    fig.update_layout(barmode="overlay")
    return fig


# --- over time --------------------------------------------------------------------------------


def _t0(steps: list[Step]) -> int:
    sent = [r.sent_ns for st in steps for r in st.records if r.sent_ns]
    return min(sent) if sent else 0


def ttft_timeline(steps: list[Step]) -> go.Figure:
    fig = _fig("TTFT over the run (warm-up and drift show here)", "time since start (s)", "TTFT (ms)")
    t0 = _t0(steps)
    for st in steps:
        for warm in (True, False):
            pts = [
                ((r.sent_ns - t0) / 1e9, v / 1e6)
                for r in st.records
                if r.warmup is warm and r.status is Status.OK and (v := ttft_ns(r)) is not None
            ]
            if not pts:
                continue
            pts = _thin(pts)
            fig.add_trace(
                go.Scatter(
                    x=[p[0] for p in pts], y=[p[1] for p in pts], mode="markers",
                    name=f"{st.label} warm-up" if warm else st.label,
                    marker={"size": 4, "symbol": "x" if warm else "circle"},
                )
            )  # fmt: skip
        _draw_ramp(fig, st, t0)
    return fig


def _draw_ramp(fig: go.Figure, st: Step, t0: int) -> None:
    """A ramp-up asked for (--ramp-up, vLLM's --ramp-up-strategy) as a shaded band: it is no steady
    load, and the steady window leaves it out."""
    ramp = ((st.result.get("conditions") or {}).get("load") or {}).get("ramp")
    sends = [r.sent_ns for r in st.records if not r.warmup and r.sent_ns]
    if not ramp or not sends:
        return
    start = (min(sends) - t0) / 1e9
    end = start + ramp["duration_s"] if ramp.get("duration_s") else (max(sends) - t0) / 1e9
    what = f"{ramp['strategy']} ramp-up of the {ramp.get('of', 'rate')}"
    if ramp.get("start_rps") is not None:
        what += f", {ramp['start_rps']:g} to {ramp['end_rps']:g} req/s"
    fig.add_vrect(
        x0=start, x1=end, fillcolor="orange", opacity=0.15, line_width=0,
        annotation_text=f"{what} (not in the steady window)", annotation_position="top left",
    )  # fmt: skip


def prefill_scatter(steps: list[Step]) -> go.Figure:
    fig = _fig("Input length vs TTFT (the prefill slope)", "prompt tokens", "TTFT (ms)")
    for st in steps:
        pts = [
            (r.prompt_tokens if r.prompt_tokens is not None else r.prompt_tokens_requested, v / 1e6)
            for r in st.records
            if not r.warmup and r.status is Status.OK and (v := ttft_ns(r)) is not None
        ]
        pts = _thin([p for p in pts if p[0] is not None])
        if pts:
            fig.add_trace(
                go.Scatter(x=[p[0] for p in pts], y=[p[1] for p in pts], mode="markers",
                           name=st.label, marker={"size": 4})
            )  # fmt: skip
    return fig


def errors_over_time(steps: list[Step], bins: int = 40) -> go.Figure:
    fig = _fig("Errors by kind over time", "time since start (s)", "failed requests")
    t0 = _t0(steps)
    failed = [r for st in steps for r in st.records if r.status in FAILURE_STATUSES and not r.warmup]
    ends = [((r.end_ns or r.sent_ns) - t0) / 1e9 for st in steps for r in st.records if r.sent_ns]
    if not failed:
        fig.add_annotation(
            text="no failed requests", showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper"
        )
        fig.add_trace(go.Bar(x=[0.0], y=[0], name="errors", showlegend=False))
        return fig
    span = max(ends) if ends else 1.0
    width = max(span / bins, 1e-3)
    for status in sorted({r.status for r in failed}, key=lambda s: s.value):
        times = [((r.end_ns or r.sent_ns) - t0) / 1e9 for r in failed if r.status is status]
        counts: dict[float, int] = {}
        for t in times:
            b = round(int(t / width) * width, 6)
            counts[b] = counts.get(b, 0) + 1
        fig.add_trace(go.Bar(x=list(counts), y=list(counts.values()), name=status.value, width=width))
    fig.update_layout(barmode="stack")
    return fig


def leading_indicators(step: Step) -> go.Figure | None:
    """Client TTFT and the engine's queue and KV-cache usage on one timeline: the queue rises
    before the latency does. None when the run has no server metrics."""
    series = (step.result.get("server_metrics") or {}).get("series") or {}
    if not series:
        return None
    fig = _fig(
        "Leading indicators: engine queue and KV cache against client TTFT",
        "time since start (s)",
        "TTFT (ms)",
    )
    fig.update_layout(
        yaxis2={"title": "requests / KV usage %", "overlaying": "y", "side": "right"},
        legend={"orientation": "h", "y": -0.25},
    )
    t0 = _t0([step])
    pts = _thin(
        [
            ((r.first_token_ns - t0) / 1e9, v / 1e6)
            for r in step.records
            if r.status is Status.OK and r.first_token_ns is not None and (v := ttft_ns(r)) is not None
        ]
    )
    fig.add_trace(
        go.Scatter(
            x=[p[0] for p in pts],
            y=[p[1] for p in pts],
            mode="markers",
            name="client TTFT",
            marker={"size": 4},
        )
    )
    for name, label, scale in (
        ("waiting", "waiting requests", 1),
        ("running", "running requests", 1),
        ("kv_usage", "KV cache usage %", 100),
    ):
        points = series.get(name)
        if points:
            fig.add_trace(
                go.Scatter(
                    x=[p[0] for p in points],
                    y=[p[1] * scale for p in points],
                    mode="lines",
                    name=label,
                    yaxis="y2",
                )
            )
    return fig
