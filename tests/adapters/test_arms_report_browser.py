"""The arms-over-time page (arms --html) in a real headless Chromium: every chart draws, nothing
errors, nothing is fetched, and the charts hold the stored points (each arm's share per bucket)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from app.rollout.arms_traffic import store_rollout

from adapters.test_report_browser import CHROMIUM, open_in_chromium
from tokenpace.adapters.report.arms_html import render_arms_html
from tokenpace.adapters.store import connect
from tokenpace.app.rollout.arms import ArmsQuery
from tokenpace.app.rollout.arms_timeline import arms_over_time

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")

# Per figure: its title and each trace's name and y values, as plotly holds them.
PROBE = (
    "JSON.stringify([...document.querySelectorAll('div[id^=\"tp-fig-\"]')].map(d => ({"
    " title: d.layout.title.text, traces: d.data.map(t => ({name: t.name, y: t.y}))})))"
)


def test_the_arms_page_draws_the_stored_shares_with_no_error(tmp_path: Path) -> None:
    store = connect(str(tmp_path / "runs.db"))
    started = store_rollout(store)
    doc = arms_over_time(store, ArmsQuery(started, resamples=50)).to_dict()
    page = tmp_path / "arms.html"
    page.write_text(render_arms_html(json.loads(json.dumps(doc))), encoding="utf-8")
    out = asyncio.run(open_in_chromium(page, tmp_path / "arms.png", extra=PROBE))
    assert out["errors"] == [], out["errors"]
    assert all(url.startswith("file://") for url in out["requests"]), out["requests"]
    state = out["state"]
    assert state["want"] == state["got"] == 7 and state["traces"] > 0
    figures = {f["title"]: f["traces"] for f in state["extra"]}
    shares = {t["name"]: t["y"] for t in figures["Traffic share by arm"]}
    for arm, series in doc["timeline"]["arms"].items():
        assert shares[arm] == series["share"]  # the stored points, bucket by bucket
    for i, share in enumerate(zip(*shares.values(), strict=True)):  # a bucket with traffic: shares add to 1
        if any(v is not None for v in share):
            assert sum(share) == pytest.approx(1.0), i
    load = {t["name"]: t["y"] for t in figures[next(k for k in figures if k.startswith("Load each arm"))]}
    assert load == {arm: s["inflight_mean"] for arm, s in doc["timeline"]["arms"].items()}
