"""The selection report: per scenario, the matrix, each candidate's P50 and judged percentile against
the tolerance line (interval bars), and cost against latency with the Pareto front. One offline file
in the style of the run report (plotly.js inside)."""

from __future__ import annotations

import html
import math
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from tokenpace.adapters.report.html import _CSS, _Page, plotly_tail
from tokenpace.core.analysis.selection.cost import pareto_front

_COLOUR = {"pass": "#2a9d4b", "fail": "#c0392b", "undecided": "#d68910", "unknown": "#b8860b"}
_MATRIX_CSS = "td.pass{background:#e3f5e8}td.fail{background:#fde2e0}td.unknown{background:#fff5d6}"


def _name(cand: dict[str, Any]) -> str:
    """A candidate as the charts label it: a predicted one says so."""
    return str(cand["candidate"]) + (" (PREDICTED)" if cand.get("predicted") else "")


def _latency_lines(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return list(doc["scenario"]["slo"])


def lines_figure(doc: dict[str, Any]) -> go.Figure:
    """One panel per line: each candidate's P50 (dot) and judged percentile with its 95 % interval."""
    lines = _latency_lines(doc)
    titles = [
        f"{ln['metric'].upper()} {ln['percentile'].upper()} < {ln['threshold_ms']:g} ms" for ln in lines
    ]
    fig = make_subplots(rows=1, cols=len(lines), subplot_titles=titles)
    for col, line in enumerate(lines, 1):
        key = f"{line['metric']}_ms"
        pct = line["percentile"]
        for cand in doc["candidates"]:
            v = cand.get("values") or {}
            value = v.get(f"{key}.{pct}")
            if value is None:
                continue
            hi, lo = _bound(v, f"{key}.{pct}.hi", value), _bound(v, f"{key}.{pct}.lo", value)
            name = _name(cand)
            fig.add_trace(
                go.Scatter(
                    x=[name], y=[value], mode="markers", name=f"{name} {pct.upper()}",
                    marker={"color": _COLOUR[cand["status"]], "size": 11, "symbol": "diamond"},
                    error_y={"type": "data", "symmetric": False, "array": [hi - value],
                             "arrayminus": [value - lo]},
                    showlegend=False,
                ),
                row=1, col=col,
            )  # fmt: skip
            if (p50 := v.get(f"{key}.p50")) is not None:
                fig.add_trace(
                    go.Scatter(x=[name], y=[p50], mode="markers", name=f"{name} P50",
                               marker={"color": "#555", "size": 7}, showlegend=False),
                    row=1, col=col,
                )  # fmt: skip
        fig.add_hline(
            y=line["threshold_ms"], line_dash="dash", line_color="#c0392b", row=1, col=col,
            annotation_text="tolerance line", annotation_position="top left",
        )  # fmt: skip
        fig.update_yaxes(title_text="ms", rangemode="tozero", row=1, col=col)
    fig.update_layout(
        title=f"{doc['scenario']['name']}: candidates against the line (dot P50, diamond with 95% interval)",
        height=380, margin={"t": 70, "l": 50, "r": 20, "b": 60},
    )  # fmt: skip
    return fig


def _bound(values: dict[str, Any], key: str, value: float) -> float:
    """A side of an interval, drawn; one the run cannot bound (None, infinite) draws no bar."""
    got = values.get(key)
    return value if got is None or not math.isfinite(got) else float(got)


def cost_figure(doc: dict[str, Any]) -> go.Figure:
    """Cost per 1k requests against the first line's upper bound; the Pareto front joined."""
    line = _latency_lines(doc)[0]
    key = f"{line['metric']}_ms.{line['percentile']}.hi"
    pts = []
    for cand in doc["candidates"]:
        cost, upper = (cand.get("cost") or {}).get("per_k_requests"), (cand.get("values") or {}).get(key)
        if cost is not None and upper is not None and math.isfinite(upper):
            pts.append((_name(cand), float(upper), float(cost), cand["status"]))
    fig = go.Figure()
    for name, x, y, status in pts:
        fig.add_trace(
            go.Scatter(x=[x], y=[y], mode="markers+text", text=[name], textposition="top center", name=name,
                       marker={"color": _COLOUR[status], "size": 12}, showlegend=False)
        )  # fmt: skip
    front = pareto_front([(n, x, y) for n, x, y, _ in pts])
    by_name = {n: (x, y) for n, x, y, _ in pts}
    if front:
        fig.add_trace(
            go.Scatter(x=[by_name[n][0] for n in front], y=[by_name[n][1] for n in front], mode="lines",
                       name="Pareto front", line={"dash": "dot", "color": "#444"})
        )  # fmt: skip
    fig.add_vline(x=line["threshold_ms"], line_dash="dash", line_color="#c0392b")
    fig.update_layout(
        title=f"{doc['scenario']['name']}: cost vs latency (Pareto front dotted)",
        xaxis_title=f"{line['metric'].upper()} {line['percentile'].upper()} upper bound (ms)",
        yaxis_title="$ per 1k requests", height=380, margin={"t": 70, "l": 60, "r": 20, "b": 60},
    )  # fmt: skip
    if not pts:
        fig.add_annotation(text="no priced candidate with numbers at the scenario's load", showarrow=False)
    return fig


def _matrix(doc: dict[str, Any], candidates: list[dict[str, Any]]) -> str:
    first = doc["candidates"][0]["cells"]
    head = "<th>candidate</th>" + "".join(f"<th>{html.escape(c['line'])}</th>" for c in first)
    head += "<th>verdict</th><th>$ per 1k requests</th>"
    rows = []
    for cand in candidates:
        cells = "".join(
            f'<td class="{c["status"]}">{c["status"].upper()}: {html.escape(c["reason"])}</td>'
            for c in cand["cells"]
        )
        cost = (cand.get("cost") or {}).get("per_k_requests")
        where = html.escape(cand["placement"]["where"])
        if cand.get("predicted"):
            where += f"<br><b>{html.escape(cand['predicted'])}</b>"
        where += "".join(f"<br>caveat: {html.escape(c)}" for c in cand.get("caveats") or ())
        verdict = cand["status"].upper() + (" PREDICTED" if cand.get("predicted") else "")
        rows.append(
            f"<tr><td>{html.escape(cand['candidate'])} ({cand['kind']})<br><small>{where}</small></td>{cells}"
            f'<td class="{cand["status"]}">{verdict}</td>'
            f"<td>{'' if cost is None else f'{cost:.4g}'}</td></tr>"
        )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _matrices(doc: dict[str, Any]) -> str:
    """The measured candidates' matrix, then the predicted ones' under a heading that says so."""
    measured = [c for c in doc["candidates"] if not c.get("predicted")]
    predicted = [c for c in doc["candidates"] if c.get("predicted")]
    out = _matrix(doc, measured) if measured else ""
    if predicted:
        out += "<h3>PREDICTED by the simulator (not measured)</h3>" + _matrix(doc, predicted)
    return out


def _recommendation(doc: dict[str, Any]) -> str:
    rec = doc["recommendation"]
    text = f"{rec['candidate']} ({rec['reason']})" if rec["candidate"] else f"none ({rec['reason']})"
    out = f"<p><b>Recommendation:</b> {html.escape(text)}</p>"
    pick = doc.get("predicted_recommendation")
    if pick:
        out += (
            f"<p><b>PREDICTED:</b> {html.escape(str(pick['candidate']))} would be picked on predicted "
            f"numbers ({html.escape(pick['reason'])}); {html.escape(pick['note'])}</p>"
        )
    elif any(c.get("predicted") for c in doc["candidates"]):
        out += "<p><b>PREDICTED candidates:</b> a predicted pass is not a measured one.</p>"
    return out


def render_select_html(docs: list[dict[str, Any]]) -> str:
    """The page for one or more ``select`` results (each the JSON ``select --json`` prints)."""
    page = _Page()
    page.add("<h1>tokenpace select</h1>")
    for doc in docs:
        s = doc["scenario"]
        load = f"{s['rate']:g} req/s" if s.get("rate") is not None else f"concurrency {s['concurrency']}"
        page.add(f"<h2>{html.escape(s['name'])}</h2>")
        page.add(
            f'<p class="sub">{html.escape(s.get("description") or "")} — {s["input_len"]} in / '
            f"{s['output_len']} out tokens at {load}</p>"
        )
        page.add(_matrices(doc))
        page.add(_recommendation(doc))
        page.grid([lines_figure(doc), cost_figure(doc)])
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>tokenpace select</title>'
        f"<style>{_CSS}{_MATRIX_CSS}td{{text-align:left}}</style>"
        "</head>"
        f'<body data-figures="{page.figures}">{"".join(page.parts)}'
        '<p class="sub">Made by tokenpace; opens offline (plotly.js is inside this file).</p>'
        f"{plotly_tail()}</body></html>"
    )
