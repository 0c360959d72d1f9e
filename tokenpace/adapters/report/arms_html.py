"""A gateway session's arms over time as figures and one offline HTML file (``arms --html``): per arm
its traffic share, the load it carried, TTFT and E2E percentiles, error and business-event rates,
every configuration change a dotted line, and the guards' verdict on each step of the rollout.
The figures are plain plotly (also drawn by the web console's rollout page)."""

from __future__ import annotations

import copy
import functools
import html
from datetime import datetime, timezone
from typing import Any

import plotly.graph_objects as go

from tokenpace.adapters.report.figures import LAYOUT
from tokenpace.adapters.report.html import _CSS, _Page, _table, plotly_tail
from tokenpace.adapters.report.tables import fmt

# (title, series key, y axis title, y axis format)
_PANELS = (
    ("Traffic share by arm", "share", "share of requests", ".0%"),
    ("Load each arm carried (in flight on its upstream at dispatch, mean)", "inflight_mean", "requests", ""),
    ("TTFT P50 by arm", "ttft_p50", "ms", ""),
    ("TTFT P95 by arm", "ttft_p95", "ms", ""),
    ("E2E P95 by arm", "e2e_p95", "ms", ""),
    ("Error rate by arm", "error_rate", "share of requests", ".1%"),
)


def iso(unix_s: float) -> str:
    return datetime.fromtimestamp(unix_s, timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def _markers(fig: go.Figure, timeline: dict[str, Any]) -> None:
    """Each configuration change: a dotted vertical line, its epoch and new split on top."""
    for c in timeline["changes"]:
        x = iso(c["unix_s"])
        line = {"dash": "dot", "color": "#888"}
        fig.add_shape(type="line", x0=x, x1=x, yref="paper", y0=0, y1=1, line=line)
        split = ", ".join(f"{a}={w:g}" for a, w in c["split_after"].items())
        fig.add_annotation(
            x=x, yref="paper", y=1.0, text=f"epoch {c['epoch']}", hovertext=f"{split} ({c['who']})",
            showarrow=False, yanchor="bottom", font={"size": 10},
        )  # fmt: skip


@functools.lru_cache(maxsize=1)
def _base_layout() -> dict[str, Any]:
    """LAYOUT (its template) as plotly validated it, once: plotly validates and copies the template
    again for every figure otherwise, most of the time drawing these figures takes."""
    layout: dict[str, Any] = go.Layout(**LAYOUT).to_plotly_json()
    return layout


def _figure(title: str, yaxis: str) -> go.Figure:
    layout = copy.deepcopy(_base_layout())
    layout |= {"title": {"text": title}, "xaxis": {"title": {"text": "time (UTC)"}}}
    layout["yaxis"] = {"title": {"text": yaxis}}
    return go.Figure(layout=layout, _validate=False)  # the layout validated once; each trace as made


def arms_figures(timeline: dict[str, Any]) -> list[go.Figure]:
    """One figure per panel, a line per arm (per arm and event for business events)."""
    xs = [iso(t) for t in timeline["t"]]
    figs = []
    for title, key, yaxis, tickformat in _PANELS:
        fig = _figure(title, yaxis)
        if tickformat:
            fig.update_yaxes(tickformat=tickformat)
        for arm, series in timeline["arms"].items():
            fig.add_trace(go.Scatter(x=xs, y=series[key], name=arm, mode="lines+markers", connectgaps=False))
        _markers(fig, timeline)
        figs.append(fig)
    events = _figure("Business events per request by arm", "per request")
    for arm, series in timeline["arms"].items():
        for name, ys in series["events"].items():
            events.add_trace(go.Scatter(x=xs, y=ys, name=f"{name} {arm}", mode="lines+markers"))
    if events.data:
        _markers(events, timeline)
        figs.append(events)
    return figs


def steps_table(steps: list[dict[str, Any]]) -> tuple[list[str], list[list[Any]]]:
    """Each rollout step's verdict and its guards' outcomes (with the interval of each change)."""
    rows: list[list[Any]] = []
    for s in steps:
        guards = "; ".join(
            f"{g['guard']} on {g['arm']}: {g['outcome']}"
            + (f" [{fmt(g['ci'][0], 4)}, {fmt(g['ci'][1], 4)}]" if g.get("ci") else "")
            for g in s["guards"]
        )
        verdict = s["verdict"] or "no traffic"
        until = iso(s["until_unix"]) if s["until_unix"] is not None else "now"
        rows.append([f"{iso(s['since_unix'])} - {until}", verdict, s["reason"], guards or "-"])
    return ["step (UTC)", "verdict", "why", "guards"], rows


def render_arms_html(doc: dict[str, Any], title: str | None = None) -> str:
    """The page for ``ArmsOverTime.to_dict()``: one offline file, plotly.js inside."""
    page = _Page()
    timeline = doc["timeline"]
    name = title or "tokenpace arms over time"
    page.add(f"<h1>{html.escape(name)}</h1>")
    page.add(
        f'<p class="sub">{html.escape(iso(doc["since_unix"]))} to {html.escape(iso(doc["until_unix"]))} UTC, '
        f"buckets of {timeline['bucket_s']:g} s (a bucket's percentile needs "
        f"{timeline['min_bucket_n']} requests of its arm)</p>"
    )
    for warning in doc["warnings"]:
        page.add(f'<p class="warn">{html.escape(warning)}</p>')
    page.add("<h2>Verdict of each rollout step</h2>" + _table(steps_table(doc["steps"])))
    page.add("<h2>Arms over time</h2>")
    page.grid(arms_figures(timeline))
    changes = [
        [iso(c["unix_s"]), c["session"], c["epoch"], c["who"], ", ".join(c["changed"])]
        for c in timeline["changes"]
    ]
    if changes:
        page.add(
            "<h2>Configuration changes</h2>"
            + _table((["when (UTC)", "session", "epoch", "who", "changed"], changes))
        )
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(name)}</title><style>{_CSS}</style></head>"
        f'<body data-figures="{page.figures}">{"".join(page.parts)}'
        '<p class="sub">Made by tokenpace; opens offline (plotly.js is inside this file).</p>'
        f"{plotly_tail()}</body></html>"
    )
