"""The selection report in headless Chromium: every chart draws, nothing errors, nothing is fetched."""

from __future__ import annotations

import asyncio

import pytest
from core.analysis.selection.test_select import result

from adapters.test_report_browser import CHROMIUM, open_in_chromium
from tokenpace.adapters.report.select_html import render_select_html
from tokenpace.app.selection.select import SelectReport
from tokenpace.core.analysis.selection.cost import cost_of, recommend
from tokenpace.core.analysis.selection.scenarios import Prices, Scenario, SloLine
from tokenpace.core.analysis.selection.select import judge, run_point

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")


def _doc(name: str, lines: tuple[SloLine, ...]) -> dict:
    scenario = Scenario(name, "a test scenario", 512, 64, 4.0, None, lines)
    verdicts = [
        judge(scenario, "small", [run_point("a", result(300, 350), good=200)], sweep=False),
        judge(scenario, "large", [run_point("b", result(150, 170), good=200)], sweep=False),
        judge(scenario, "slow", [run_point("c", result(900, 1000), good=100)], sweep=False),
    ]
    prices = {"small": Prices(hourly=2.0), "large": Prices(hourly=8.0), "slow": Prices(hourly=1.0)}
    costs = {v.candidate: cost_of(prices[v.candidate], v) for v in verdicts}
    return SelectReport(scenario, verdicts, costs, recommend(verdicts, costs), None).to_dict()


def test_select_report_renders_in_chromium_without_errors_or_network(tmp_path):
    docs = [
        _doc("voice", (SloLine("ttft", "p95", 800.0),)),
        _doc("chat", (SloLine("ttft", "p95", 400.0), SloLine("e2e", "p95", 500.0))),
    ]
    page = tmp_path / "select.html"
    page.write_text(render_select_html(docs), encoding="utf-8")
    shot = tmp_path / "select.png"
    out = asyncio.run(open_in_chromium(page, shot))
    state = out["state"]
    assert state["want"] == 4 and state["got"] == 4, state  # per scenario: the lines and the cost chart
    assert state["traces"] >= 12, state
    assert any("candidates against the line" in t for t in state["titles"]), state["titles"]
    assert any("cost vs latency" in t for t in state["titles"]), state["titles"]
    assert out["errors"] == [], out["errors"]
    assert all(u.startswith(("file:", "data:", "about:")) for u in out["requests"]), out["requests"]
    html = page.read_text(encoding="utf-8")
    assert html.count('class="fail"') >= 2 and "Pareto front" in html
    print(f"screenshot: {shot}")
