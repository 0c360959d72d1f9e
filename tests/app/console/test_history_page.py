"""History: one test over time. The fixture's nightly test shifts +30 % on its eighth night: the page
says so in one line, with the run; the NOT VALID night is marked and left out of the fit; the
baseline is marked and the gate's threshold drawn from it; a change of conditions is a new series.
In Chromium: from the runs page one click reaches that line, and the chart holds the stored values."""

from __future__ import annotations

import asyncio

import pytest
from aiohttp.test_utils import TestClient, TestServer

from app.console.browser import needs_chromium, visit
from app.console.console_fixtures import make_store
from tokenpace.app.console.server import build_app


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory):
    s = make_store(tmp_path_factory.mktemp("history") / "runs.db")
    yield s
    s.close()


async def _json(store, *paths: str) -> list[tuple[int, dict]]:
    async with TestClient(TestServer(build_app(store), host="127.0.0.1")) as client:
        return [(r.status, await r.json()) for r in [await client.get(p) for p in paths]]


def test_a_shift_is_found_and_said_with_its_run_and_size(store) -> None:
    [(status, data)] = asyncio.run(_json(store, "/api/history?label=test=nightly&threshold=10%"))
    assert status == 200 and data["series_found"] == 2  # concurrency 4, and the one run at 16
    nightly = next(s for s in data["series"] if len(s["points"]) > 1)
    other = next(s for s in data["series"] if len(s["points"]) == 1)
    assert nightly["name"] == "load.concurrency=4" and other["name"] == "load.concurrency=16"
    assert [p["run_id"] for p in nightly["points"]] == [f"night{d:02d}" for d in range(1, 15)]
    assert nightly["not_valid_runs"] == ["night05"] and nightly["fitted_runs"] == 13
    [shift] = nightly["shifts"]
    assert shift["run_id"] == "night08" and 0.2 < shift["rel_change_mean"] < 0.4
    assert shift["rel_ci_low"] > 0.05  # the interval of its size clears the smallest shift called
    assert (
        nightly["headline"].startswith("P95 TTFT shifted +3")
        and "on 2026-01-08 (run night08)" in nightly["headline"]
    )
    base = next(p for p in nightly["points"] if p["run_id"] == "night03")
    assert base["baselines"] == ["prod"]
    assert nightly["gate"]["value"] == pytest.approx(base["value"] * 1.10)
    assert all(p["ci95"][0] <= p["value"] <= p["ci95"][1] for p in nightly["points"])
    assert "too few valid runs" in other["headline"]


def test_compare_with_previous_skips_a_not_valid_night(store) -> None:
    """Compare refuses a NOT VALID run, so the link on the night after one goes to the last valid."""
    [(status, data)] = asyncio.run(_json(store, "/api/history?label=test=nightly"))
    nightly = next(s for s in data["series"] if len(s["points"]) > 1)
    points = {p["run_id"]: p for p in nightly["points"]}
    assert status == 200 and points["night06"]["previous_valid"] == "night04"
    assert points["night04"]["previous_valid"] == "night03" and points["night01"]["previous_valid"] is None
    html = asyncio.run(_html(store, "/history?label=test=nightly"))
    assert "a=night04&amp;b=night06" in html and "b=night05" not in html


async def _html(store, path: str) -> str:
    async with TestClient(TestServer(build_app(store), host="127.0.0.1")) as client:
        return await (await client.get(path)).text()


def test_a_run_picks_its_test_and_bad_filters_are_refused(store) -> None:
    (s1, test), (s2, bad), (s3, _), (s4, tput) = asyncio.run(
        _json(
            store,
            "/api/history?run=night03",
            "/api/history?metric=ttft.p42",
            "/api/history?run=nope",
            "/api/history?run=night03&metric=throughput",
        )
    )
    assert s1 == 200 and test["run"] == "night03" and len(test["series"]) == 1
    ids = {p["run_id"] for p in test["series"][0]["points"]}
    assert "other01" not in ids and {"night01", "night14"} <= ids  # other01 ran at another load
    assert s2 == 400 and "unknown metric" in bad["error"]
    assert s3 == 404
    assert s4 == 200 and tput["metric_name"] == "throughput"


@needs_chromium
def test_from_the_runs_page_one_click_reaches_when_p95_ttft_shifted(store) -> None:
    link = (
        "JSON.stringify([...document.querySelectorAll('#runs tbody tr')]"
        ".find(tr => tr.innerText.includes('night03'))"
        ".querySelector('a[href^=\"/history\"]').getAttribute('href'))"
    )
    chart = (
        "JSON.stringify({headline: [...document.querySelectorAll('.headline')].map(p => p.innerText),"
        " ys: document.querySelector('div.tp-chart').data"
        ".filter(t => t.mode === 'lines+markers').map(t => t.y),"
        " names: document.querySelector('div.tp-chart').data.map(t => t.name),"
        " pwned: window.__pwned || null, text: document.body.innerText})"
    )

    async def go():
        async with TestServer(build_app(store), host="127.0.0.1") as server:
            [runs] = await visit([str(server.make_url("/runs?label=test=nightly"))], link)
            [hist] = await visit([str(server.make_url(runs["value"]))], chart)
            [api] = await _json(store, runs["value"].replace("/history", "/api/history"))
            return runs, hist, api[1]

    runs, hist, api = asyncio.run(go())
    assert runs["errors"] == [] and hist["errors"] == [], (runs["errors"], hist["errors"])
    assert any("P95 TTFT shifted +3" in h and "(run night08)" in h for h in hist["value"]["headline"])
    stored = [p["value"] for p in api["series"][0]["points"] if p["valid"]]
    assert hist["value"]["ys"][0] == pytest.approx(stored)
    assert hist["value"]["pwned"] is None and "hostile<script>" in hist["value"]["text"]  # same test
    names = hist["value"]["names"]
    assert any("NOT VALID" in n for n in names) and any("baseline" in n for n in names)
    assert any("gate threshold" in n for n in names)
