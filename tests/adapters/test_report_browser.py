"""The HTML report in a real headless Chromium: every chart renders, nothing errors, nothing is fetched,
no table runs off the page and no legend covers an axis label.

Talks to Chromium over the DevTools protocol (tokenpace/testing/cdp_page.py) to read console errors,
uncaught exceptions and network requests, and saves a screenshot of the whole page.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tokenpace.adapters.report.figures import make_steps
from tokenpace.adapters.report.html import render_html
from tokenpace.app.bench.bench import BenchConfig
from tokenpace.app.sweep.sweep import Sweep, SweepConfig
from tokenpace.core.metrics import Slo
from tokenpace.core.workload.lengths import parse_length
from tokenpace.testing.cdp_page import chromium_path, open_page
from tokenpace.testing.scripted_server import Script, ScriptedServer

CHROMIUM = chromium_path()
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="chromium is not installed (make test installs it: scripts/system-packages.txt)"
)


# At the page's width: how far the page and each table reach past the body (px), and the charts
# whose legend covers one of their own axis labels or titles.
LAYOUT_PROBE = """(() => {
  const body = document.body.getBoundingClientRect();
  const hit = (a, b) => a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
  const covered = [];
  for (const fig of document.querySelectorAll('div[id^="tp-fig-"]')) {
    const legend = fig.querySelector('.legend .bg');
    if (!legend) continue;
    const box = legend.getBoundingClientRect();
    const names = '.xtick text, .ytick text, .y2tick text, .xtitle, .ytitle, .y2title';
    const labels = [...fig.querySelectorAll(names)]
      .map(e => e.getBoundingClientRect()).filter(r => r.width > 0);
    if (labels.some(r => hit(r, box))) covered.push(fig.querySelector('.gtitle').textContent);
  }
  return JSON.stringify({
    page_past: document.documentElement.scrollWidth - document.documentElement.clientWidth,
    tables_past: [...document.querySelectorAll('table')]
      .map(t => Math.round(t.getBoundingClientRect().right - body.right)),
    legend_covers_labels: covered,
  });
})()"""


# How many figures the page declares and has drawn, its traces and its chart titles.
FIGURES = (
    "JSON.stringify({want: +document.body.dataset.figures,"
    " got: [...document.querySelectorAll('div[id^=\"tp-fig-\"]')]"
    ".filter(d => d.querySelector('.main-svg .cartesianlayer')).length,"
    " traces: document.querySelectorAll('.scatterlayer .trace, .barlayer .trace').length,"
    " titles: [...document.querySelectorAll('.gtitle')].map(t => t.textContent)})"
)


async def open_in_chromium(page: Path, screenshot: Path, width: int = 1400, extra: str | None = None) -> dict:
    """``extra``: a JavaScript expression (JSON text) read once the figures drew: ``out["extra"]``."""
    async with open_page(width) as tab:
        await tab.open(page.as_uri())
        state = await tab.read(FIGURES)
        state["layout"] = await tab.read(LAYOUT_PROBE)
        if extra is not None:
            state["extra"] = await tab.read(extra)
        await tab.screenshot(screenshot)
        return {"state": state, "errors": tab.problems(), "requests": tab.requests()}


async def make_report(path: Path) -> None:
    failing = Script(ttft_s=0.01, itl_s=0.002, cut_after=2)
    async with ScriptedServer(Script(ttft_s=0.01, itl_s=0.002), scripts={"cut": failing}) as srv:
        base = BenchConfig(
            url=srv.url, model="m", input_len=parse_length("8:64"), output_len=parse_length("6"),
            requests=10, warmup=1, timeout_s=5.0, slo=Slo(ttft_ms=300),
        )  # fmt: skip
        result = await Sweep(SweepConfig(base=base, mode="concurrency", steps=[1, 2, 4], peak_rps=50)).run()
        doc = result.to_dict()
        cut = await Sweep(SweepConfig(base=BenchConfig(**{**base.__dict__, "model": "cut"}), steps=[2])).run()
    curve = [s for s in result.steps if s.phase == "step" and not s.superseded]  # the revisit is off it
    steps = make_steps(doc["steps"], [s.result.records for s in curve])
    # one step with interrupted streams, so the errors chart has bars
    steps[-1].records.extend(cut.steps[0].result.records)
    path.write_text(render_html(doc, steps), encoding="utf-8")


def test_report_renders_in_chromium_without_errors_or_network(tmp_path):
    page = tmp_path / "report.html"
    asyncio.run(make_report(page))
    shot = tmp_path / "report.png"
    out = asyncio.run(open_in_chromium(page, shot))
    state = out["state"]
    assert state["want"] == 13 and state["got"] == 13, state
    assert state["traces"] >= 20, state
    assert "TTFT vs load" in state["titles"] and "Errors by kind over time" in state["titles"]
    assert out["errors"] == [], out["errors"]
    assert all(u.startswith(("file:", "data:", "about:")) for u in out["requests"]), out["requests"]
    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 50_000
    print(f"screenshot: {shot}")
    layout = state["layout"]
    # at 1,400 px every table fits the page (the steps table too), and no legend covers an axis label
    assert layout["page_past"] <= 0 and max(layout["tables_past"]) <= 0, layout
    assert layout["legend_covers_labels"] == [], layout
    # narrower than the steps table: it scrolls in its own box, the page does not
    narrow = asyncio.run(open_in_chromium(page, tmp_path / "narrow.png", width=900))["state"]["layout"]
    assert narrow["page_past"] <= 0 and max(narrow["tables_past"]) > 0, narrow
