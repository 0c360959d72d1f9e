"""Templates (jinja2, autoescape on) and charts: a page's data and figures to HTML, served (plotly.js
and the console's script from /static, no inline script) or offline (both inside the file)."""

from __future__ import annotations

import functools
import importlib.resources
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlencode

import jinja2
from markupsafe import Markup
from plotly import __version__ as plotly_version
from plotly.offline import get_plotlyjs

from tokenpace.adapters.report.html import PLOT_SCRIPT_TYPE, plotly_tail
from tokenpace.app.console.page import Chart
from tokenpace.app.reports.tables import fmt, interval

PLOTLY_PATH = f"/static/plotly-{plotly_version}.min.js"  # versioned: cached by browsers for a day


@functools.lru_cache(maxsize=1)
def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("tokenpace.app.console", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["fmt"] = fmt
    env.filters["interval"] = interval
    env.filters["pct"] = _pct
    env.globals["qs"] = _qs
    return env


def _pct(value: Any, digits: int = 1) -> str:
    return "" if value is None else f"{value:+.{digits}%}"


def _qs(pairs: Sequence[tuple[str, str]]) -> str:
    return ("?" + urlencode(list(pairs))) if pairs else ""


def static_file(name: str) -> bytes:
    """The console's own files (script, style) shipped in the package."""
    return (importlib.resources.files("tokenpace.app.console") / "static" / name).read_bytes()


@functools.lru_cache(maxsize=1)
def plotly_js() -> bytes:
    """plotly.js from the plotly package: the bundle the HTML reports embed, never a CDN."""
    text: str = get_plotlyjs()
    return text.encode()


def warm_up() -> None:
    """Pay at start what the first answers would: plotly's trace, layout, shape and annotation
    classes (loaded on first use) and the templates (compiled on first use)."""
    import plotly.graph_objects as go  # the figures' own import: only when serving

    fig = go.Figure(
        [go.Scatter(x=[0], y=[0], error_y={"array": [0]}), go.Bar(x=[0], y=[0]), go.Histogram(x=[0])],
        go.Layout(
            title={"text": "t"},
            xaxis={"title": {"text": "x"}},
            yaxis={"title": {"text": "y"}},
            margin={"t": 1},
        ),
    )
    fig.add_shape(type="line", x0=0, x1=0, yref="paper", y0=0, y1=1, line={"dash": "dot"})
    fig.add_annotation(x=0, y=1, yref="paper", text="a", showarrow=False, font={"size": 10})
    fig.to_json(validate=False)
    env = _env()
    for name in env.list_templates():
        env.get_template(name)


def _figure_json(chart: Chart) -> Markup:
    # JSON inside <script type="application/json">: "<" escaped so no text can close the element
    text = chart.figure.to_json(validate=False, pretty=False)
    return Markup(text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026"))


def render(
    template: str,
    data: dict[str, Any],
    charts: Sequence[Chart] = (),
    nav: Sequence[tuple[str, str]] = (),
    offline: bool = False,
    **extra: Any,
) -> str:
    """The page: ``data`` (the JSON twin's body) as the template's ``d``, each chart's figure as JSON
    for the console's script to draw; ``offline``: one file that needs no server and no network."""
    figures = [(c.title, _figure_json(c)) for c in charts]
    context = {
        "d": data,
        "charts": figures,
        "nav": nav,
        "offline": offline,
        "plotly_src": PLOTLY_PATH,
        **extra,
    }
    if offline:
        context["inline_css"] = Markup(static_file("console.css").decode())
        context["inline_js"] = Markup(static_file("console.js").decode().replace("</", "<\\/"))
        context["plotly_inline"] = Markup(plotly_tail())
        context["plot_script_type"] = PLOT_SCRIPT_TYPE
    return _env().get_template(template).render(context)
