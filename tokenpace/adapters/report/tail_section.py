"""The report's "where the P95+ requests' time went" (``report --traces FILE``): one stacked bar of
hops per request of the TTFT tail, the median share of the TTFT each hop took, and how many of the
tail had no trace (never silently left out). The data comes from ``core/analysis/diagnosis/tail_hops.py``."""

from __future__ import annotations

from statistics import median

import plotly.graph_objects as go

from tokenpace.adapters.report.figures import LAYOUT
from tokenpace.adapters.report.tables import Table, fmt
from tokenpace.core.analysis.diagnosis.tail_hops import DECODE_HOP, TTFT_HOPS, TailHops, hop_ms, median_shares

TITLE = "Where the P95+ requests' time went (traces)"
SHARE_COLUMN = "median share of TTFT"
# Path order, warm to cold: the path's hops in oranges/greys, the engine's in blues, decode faint.
_COLORS = {
    "client_gateway_ms": "#ff7f0e",
    "to_engine_ms": "#8c564b",
    "queue_ms": "#d62728",
    "prefill_ms": "#1f77b4",
    "from_engine_ms": "#7f7f7f",
    "decode_ms": "#aec7e8",
}
_ROW_PX, _FRAME_PX, _MIN_PX = 18, 120, 300  # the legend's six entries fit


def tail_figure(tail: TailHops) -> go.Figure | None:
    """One horizontal bar per explained request (slowest on top), its hops stacked in path order."""
    rows = tail.explained
    if not rows:
        return None
    labels = [f"{r.request_id} ({fmt(r.ttft_ms)} ms)" for r in rows]
    parts = [hop_ms(r.hops) for r in rows if r.hops is not None]
    fig = go.Figure()
    for name, label in (*TTFT_HOPS, DECODE_HOP):
        if not any(name in p for p in parts):
            continue  # no gateway on the path: no client-gateway hop
        fig.add_trace(
            go.Bar(
                name=label,
                y=labels,
                x=[p.get(name, 0.0) for p in parts],
                orientation="h",
                marker_color=_COLORS[name],
                hovertemplate="%{y}<br>" + label + ": %{x:.1f} ms<extra></extra>",
            )
        )
    layout = dict(LAYOUT) | {"height": max(_MIN_PX, _FRAME_PX + _ROW_PX * len(rows))}
    fig.update_layout(
        title=f"TTFT P95+ requests with a trace, hop by hop ({len(rows)})",
        xaxis_title="ms (TTFT hops, then decode)",
        barmode="stack",
        yaxis={"autorange": "reversed", "type": "category"},
        legend={"traceorder": "normal"},  # path order, top to bottom, right of the bars
        **layout,
    )
    return fig


def tail_shares_table(tail: TailHops) -> Table:
    """Per TTFT hop: the median share of the client's TTFT and the median ms, over the explained rows."""
    hops = [r.hops for r in tail.explained if r.hops is not None]
    shares = median_shares(hops)
    rows: list[list[object]] = []
    for name, label in TTFT_HOPS:
        if name in shares:
            values = [hop_ms(h)[name] for h in hops if name in hop_ms(h)]
            rows.append([label, shares[name], median(values)])
    rows.append([DECODE_HOP[1], None, median(h.decode_ms for h in hops) if hops else None])
    return ["hop", SHARE_COLUMN, "median ms"], rows


def tail_lines(tail: TailHops, source: str) -> list[tuple[str, bool]]:
    """The section's sentences, each with whether it is a warning."""
    shown = len(tail.rows)
    lines = [
        (
            f"TTFT P95 {fmt(tail.p95_ms)} ms: {tail.above} request(s) at or above it"
            + (f"; the slowest {shown} of them below." if tail.above > shown else "."),
            False,
        )
    ]
    if not tail.run_traced:
        lines.append(
            ("This run sent no trace context (bench --otlp-endpoint): no request can be followed.", True)
        )
    elif not tail.file_has_run:
        lines.append(
            (f"{source} holds none of this run's trace ids: not the collector's file of this run?", True)
        )
    untraced = tail.unsampled + tail.missing
    lines.append(
        (
            f"{untraced} of these {shown} had no trace: {tail.unsampled} not sampled (or not traced), "
            f"{tail.missing} not whole in {source} (client and engine spans with a first token).",
            untraced > 0,
        )
    )
    return lines
