"""One self-contained HTML file for a run or a sweep: plotly.js inline, no network needed to open it."""

from __future__ import annotations

import base64
import functools
import gzip
import html
import re
from typing import Any

import plotly.graph_objects as go
from plotly.offline import get_plotlyjs

from tokenpace.adapters.report import figures as F
from tokenpace.adapters.report.breakdowns import breakdowns
from tokenpace.adapters.report.gpu_lines import gpu_lines, gpu_table
from tokenpace.adapters.report.plan_lines import plan_lines
from tokenpace.adapters.report.tables import (
    INTERVAL_NOTE,
    Table,
    conditions_table,
    fmt,
    interval,
    is_sweep,
    latency_table,
    percentile_points,
    steps_table,
    sweep_conditions,
    throughput_table,
)
from tokenpace.adapters.report.tail_section import (
    SHARE_COLUMN,
    TITLE,
    tail_figure,
    tail_lines,
    tail_shares_table,
)
from tokenpace.core.analysis.diagnosis.tail_hops import TailHops

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0 auto;max-width:1280px;
padding:16px 24px;color:#222}
h1{font-size:1.5em;margin-bottom:0}h2{border-bottom:1px solid #ddd;padding-bottom:4px;margin-top:32px}
.sub{color:#666;margin-top:4px}.cards{display:flex;flex-wrap:wrap;gap:12px;margin:16px 0}
.card{border:1px solid #ddd;border-radius:8px;padding:10px 14px;min-width:150px}
.card .k{color:#666;font-size:.85em}.card .v{font-size:1.4em;font-weight:600}
.card .d{color:#888;font-size:.8em}
.wide{max-width:100%;overflow-x:auto}table{border-collapse:collapse;font-size:.9em;margin:8px 0}
td,th{border:1px solid #ddd;padding:3px 8px;text-align:right}th{background:#f6f6f6}
table.steps{font-size:.8em}table.steps td,table.steps th{padding:2px 4px}
td:first-child,th:first-child{text-align:left}tr.knee td{background:#fff3cd;font-weight:600}
.grid{display:grid;grid-template-columns:repeat(2,minmax(0,1fr));gap:8px}
@media (max-width:1100px){.grid{grid-template-columns:minmax(0,1fr)}}
.grid>div{min-width:0;overflow:hidden}
.warn{color:#b00}.bad{background:#fdd;padding:8px;border-radius:6px}ul.lines li{margin:3px 0}
dl.defs dt{font-weight:600}dl.defs dd{margin:0 0 6px 16px;color:#444}
"""


def _table(
    t: Table, cls_rows: dict[int, str] | None = None, pct_cols: tuple[str, ...] = (), cls: str = ""
) -> str:
    """A table in a box of the page's width: one too wide for it scrolls in its box, not the page."""
    headers, rows = t
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = []
    for i, row in enumerate(rows):
        cells = []
        for h, v in zip(headers, row, strict=True):
            text = f"{v:.1%}" if h in pct_cols and isinstance(v, float) else fmt(v)
            cells.append(f"<td>{html.escape(text)}</td>")
        row_cls = (cls_rows or {}).get(i)
        body.append(f"<tr{f' class={row_cls!r}' if row_cls else ''}>{''.join(cells)}</tr>")
    table_cls = f' class="{cls}"' if cls else ""
    return (
        f'<div class="wide"><table{table_cls}><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table></div>"
    )


def _card(key: str, value: str, detail: str = "") -> str:
    return (
        f'<div class="card"><div class="k">{html.escape(key)}</div><div class="v">{html.escape(value)}</div>'
        f'<div class="d">{html.escape(detail)}</div></div>'
    )


def _headline(result: dict[str, Any]) -> str:
    s = result["summary"]

    def lat(key: str, name: str) -> str:
        d = s.get(key) or {}
        if not d.get("n"):
            return ""
        points = percentile_points(s, key)
        return _card(
            f"{name} {' / '.join(p['name'].upper() for p in points)}",
            f"{' / '.join(fmt(p['value']) for p in points)} ms",
            "95% CI "
            + ", ".join(f"{p['name'].upper()} {interval(p['ci95'])}" for p in points)
            + f"; n={d['n']}, mean {fmt(d.get('mean'))} ms",
        )

    cards = [lat("ttft_ms", "TTFT"), lat("tpot_ms", "TPOT"), lat("itl_ms", "ITL"), lat("e2e_ms", "E2E")]
    cards.append(
        _card(
            "Throughput",
            f"{fmt(s.get('request_throughput'), 2)} req/s",
            f"{fmt(s.get('output_token_throughput'))} output tok/s",
        )
    )
    if s.get("goodput") is not None:
        cards.append(_card("Goodput (met SLO)", f"{fmt(s['goodput'], 2)} req/s", f"{s['goodput_ratio']:.1%}"))
    cards.append(_card("Error rate", f"{s.get('error_rate', 0):.2%}", f"{s['counts'].get('sent')} sent"))
    return f'<div class="cards">{"".join(c for c in cards if c)}</div>'


# plotly.js is 4.6 MB: inlined gzipped (1.4 MB, 1.9 MB as base64) and unpacked by the browser's own
# DecompressionStream (Chrome 80, Firefox 113, Safari 16.4), so a report stays one offline file of
# about 2 MB instead of 5. The figures' scripts wait for it.
_DEFERRED = "text/x-tokenpace-plot"
PLOT_SCRIPT_TYPE = _DEFERRED  # a script run once plotly.js is unpacked (the console's offline pages)
_PLOTLY_LOADER = (
    "(async () => {"
    " const packed = document.getElementById('tp-plotly').textContent;"
    " const bytes = Uint8Array.from(atob(packed), c => c.charCodeAt(0));"
    " const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream('gzip'));"
    " (0, eval)(await new Response(stream).text());"
    f" for (const s of document.querySelectorAll('script[type=\"{_DEFERRED}\"]')) (0, eval)(s.textContent);"
    "})();"
)


@functools.lru_cache(maxsize=1)
def plotly_js_gzip_base64() -> str:
    """plotly.js, gzipped and base64-encoded (the same bytes every time: mtime 0)."""
    return base64.b64encode(gzip.compress(get_plotlyjs().encode(), compresslevel=9, mtime=0)).decode()


class _Page:
    def __init__(self) -> None:
        self.parts: list[str] = []
        self.figures = 0

    def add(self, text: str) -> None:
        self.parts.append(text)

    def fig(self, fig: go.Figure) -> str:
        self.figures += 1
        div = fig.to_html(
            full_html=False,
            include_plotlyjs=False,
            div_id=f"tp-fig-{self.figures}",
            config={"displaylogo": False, "responsive": True},
        )
        # Drawn once the compressed plotly.js is unpacked (see _PLOTLY_LOADER), not while parsing.
        return re.sub(r"<script(?: type=\"text/javascript\")?>", f'<script type="{_DEFERRED}">', div)

    def grid(self, figs: list[go.Figure]) -> None:
        self.add('<div class="grid">' + "".join(f"<div>{self.fig(f)}</div>" for f in figs) + "</div>")


def render_html(
    doc: dict[str, Any],
    steps: list[F.Step],
    title: str | None = None,
    tail: tuple[TailHops, str] | None = None,
) -> str:
    """The report page. ``doc`` is a bench result or a sweep; ``steps`` carry the records per run;
    ``tail``: the TTFT tail hop by hop and the trace file it came from (``report --traces``)."""
    page = _Page()
    sweep = is_sweep(doc)
    first = steps[0].result
    name = title or (
        f"tokenpace sweep {doc.get('sweep_id', '')}" if sweep else f"tokenpace run {doc.get('run_id', '')}"
    )
    cond = first["conditions"]
    page.add(f"<h1>{html.escape(name)}</h1>")
    page.add(
        f'<p class="sub">{html.escape(str(cond.get("model")))} @ {html.escape(str(cond.get("endpoint")))}'
        f" — started {html.escape(str(cond.get('started_at')))}</p>"
    )
    if sweep:
        _sweep_sections(page, doc)
    else:
        if not doc.get("valid", True):
            reasons = "; ".join(doc.get("invalid_reasons") or [])
            page.add(f'<p class="bad">NOT VALID for the load asked: {html.escape(reasons)}</p>')
        stalls = ((doc["summary"].get("client") or {}).get("stalls") or {}).get("impact") or {}
        if stalls.get("held"):  # what the client's own stalls did to the requests, and why it matters or not
            page.add(f'<p class="sub">Client stalls: {html.escape(str(stalls.get("why")))}</p>')
        page.add("<h2>Headline</h2>" + _headline(doc))
        page.add(
            _table(latency_table(doc["summary"], with_ci=True))
            + f'<p class="sub">{html.escape(INTERVAL_NOTE)}</p>'
            + _table(throughput_table(doc["summary"]))
        )
        for b in breakdowns(doc["summary"]):
            page.add(f"<h2>{html.escape(b.title)} (ms)</h2>" + _table(b.table()))
        if gpu := gpu_table(doc):  # the GPUs over the steady window
            notes = "".join(f'<p class="sub">{html.escape(line)}</p>' for line in gpu_lines(doc))
            page.add("<h2>GPUs (steady window)</h2>" + _table(gpu) + notes)
    if sweep:
        shared, per_step = sweep_conditions(doc)
        page.add("<h2>Test conditions (every step)</h2>" + _table(shared))
        page.add("<h2>Conditions that differ between steps</h2>" + _table(per_step))
    else:
        page.add("<h2>Test conditions</h2>" + _table(conditions_table(first)))
    if not any(st.records for st in steps):
        page.add('<p class="warn">No records file found: distributions and timelines are missing.</p>')
    page.add("<h2>Distributions</h2>")
    page.grid(
        [
            F.cdf(steps, "ttft", "TTFT"),
            F.histogram(steps, "ttft", "TTFT"),
            F.cdf(steps, "tpot", "TPOT"),
            F.histogram(steps, "tpot", "TPOT"),
            F.cdf(steps, "e2e", "E2E"),
            F.histogram(steps, "e2e", "E2E"),
        ]
    )
    page.add("<h2>Over time and by input</h2>")
    over_time = [F.ttft_timeline(steps), F.prefill_scatter(steps), F.errors_over_time(steps)]
    if len(steps) == 1 and (leading := F.leading_indicators(steps[0])) is not None:
        over_time.insert(1, leading)
    page.grid(over_time)
    if tail is not None:
        _tail_section(page, *tail)
    defs = first.get("definitions") or {}
    if defs:
        items = "".join(f"<dt>{html.escape(k)}</dt><dd>{html.escape(v)}</dd>" for k, v in defs.items())
        page.add(f'<h2>Definitions</h2><dl class="defs">{items}</dl>')
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(name)}</title><style>{_CSS}</style>"
        "</head>"
        f'<body data-figures="{page.figures}">{"".join(page.parts)}'
        '<p class="sub">Made by tokenpace; opens offline (plotly.js is inside this file).</p>'
        f'<script type="application/gzip;base64" id="tp-plotly">{plotly_js_gzip_base64()}</script>'
        f"<script>{_PLOTLY_LOADER}</script></body></html>"
    )


def _tail_section(page: _Page, tail: TailHops, source: str) -> None:
    page.add(f'<h2 id="tail-hops">{html.escape(TITLE)}</h2>')
    for text, warn in tail_lines(tail, source):
        page.add(f"<p{' class=warn' if warn else ''}>{html.escape(text)}</p>")
    fig = tail_figure(tail)
    if fig is not None:
        page.add(
            page.fig(fig)
            + _table(tail_shares_table(tail), pct_cols=(SHARE_COLUMN,))
            + '<p class="sub">Each request\'s TTFT split into hops that add up to it (see docs/tracing.md); '
            "a hop's clock offset between machines lands in the network hops.</p>"
        )


def _sweep_sections(page: _Page, doc: dict[str, Any]) -> None:
    lines = plan_lines(doc)
    warn = ("Warning", "Little's law, step")
    items = "".join(
        f"<li{' class=warn' if ln.startswith(warn) else ''}>{html.escape(ln)}</li>" for ln in lines
    )
    page.add(f'<h2>Capacity</h2><ul class="lines">{items}</ul>')
    if doc.get("stop_reason") not in (None, "completed"):
        page.add(f"<p>Sweep stopped: {html.escape(str(doc['stop_reason']))}</p>")
    headers, rows = steps_table(doc, with_ci=True)
    knee_rows = {i: "knee" for i, r in enumerate(rows) if "knee" in str(r[-1])}
    page.add(
        "<h2>Steps</h2>"
        + _table((headers, rows), knee_rows, pct_cols=("errors",), cls="steps")  # 20 columns in 1280 px
        + f'<p class="sub">{html.escape(INTERVAL_NOTE)}</p>'
    )
    page.add("<h2>Curves against load</h2>")
    page.grid(
        [
            F.latency_curve(doc, "ttft_ms", "TTFT"),
            F.latency_curve(doc, "e2e_ms", "E2E"),
            F.latency_curve(doc, "tpot_ms", "TPOT"),
            F.throughput_curve(doc),
        ]
    )


def plotly_tail() -> str:
    """The compressed plotly.js and its loader: the end of every report's <body>."""
    return (
        f'<script type="application/gzip;base64" id="tp-plotly">{plotly_js_gzip_base64()}</script>'
        f"<script>{_PLOTLY_LOADER}</script>"
    )
