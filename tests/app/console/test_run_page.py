"""One run's page: the report's tables from the stored summary, its charts drawn from the stored
records (the CDF holds exactly the records' TTFTs), its JSON twin, 404 for no such run; in
Chromium, no console error and a hostile run name and labels shown as text."""

from __future__ import annotations

import asyncio
from urllib.parse import quote

import pytest
from aiohttp.test_utils import TestClient, TestServer

from app.console.browser import needs_chromium, visit
from app.console.console_fixtures import HOSTILE, make_store
from tokenpace.app.console.server import build_app


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory):
    s = make_store(tmp_path_factory.mktemp("run") / "runs.db")
    yield s
    s.close()


def _hostile_id(store) -> str:
    return next(r.id for r in store.list_runs() if r.id.startswith("hostile"))


def test_the_json_twin_holds_the_tables_and_the_records_drawn(store) -> None:
    async def go():
        async with TestClient(TestServer(build_app(store), host="127.0.0.1")) as client:
            ok = await client.get("/api/runs/night05")
            missing = await client.get("/api/runs/nope")
            page = await client.get("/runs/nope")
            return await ok.json(), missing.status, await missing.json(), page.status

    data, status, missing, page = asyncio.run(go())
    assert data["run"]["valid"] is False and data["run"]["invalid_reasons"]
    assert data["charted_records"] == 120 and len(data["samples"]["ttft_ms"]) == 120
    assert "_step" not in data
    assert data["latency"]["headers"][0] == "metric (ms)" and data["latency"]["rows"][0][0].startswith("TTFT")
    stored = [(r.first_token_ns - r.sent_ns) / 1e6 for r in store.load_records("night05")]
    assert sorted(data["samples"]["ttft_ms"]) == pytest.approx(sorted(stored))
    assert status == 404 and "no stored run" in missing["error"] and page == 404


@needs_chromium
def test_run_page_charts_hold_the_stored_points_and_hostile_text_stays_text(store) -> None:
    probe = (
        "JSON.stringify({pwned: window.__pwned || null, imgs: document.querySelectorAll('img').length,"
        " titles: [...document.querySelectorAll('div.tp-chart')].map(d => d.dataset.title),"
        " cdf: [...document.querySelectorAll('div.tp-chart')]"
        ".find(d => d.dataset.title === 'TTFT CDF').data[0].x,"
        " h1: document.querySelector('h1').textContent, body: document.body.innerText})"
    )

    async def go():
        async with TestServer(build_app(store), host="127.0.0.1") as server:
            paths = ["/runs/night03", "/runs/" + quote(_hostile_id(store), safe="")]
            return await visit([str(server.make_url(p)) for p in paths], probe)

    plain, hostile = asyncio.run(go())
    for page in (plain, hostile):
        assert page["errors"] == [], page["errors"]
        assert all(u.startswith("http://127.0.0.1:") for u in page["requests"]), page["requests"]
        assert page["value"]["pwned"] is None and page["value"]["imgs"] == 0
    value = plain["value"]
    assert {"TTFT CDF", "TTFT histogram", "TPOT CDF", "E2E CDF"} <= set(value["titles"])
    stored = sorted((r.first_token_ns - r.sent_ns) / 1e6 for r in store.load_records("night03"))
    assert value["cdf"] == pytest.approx(stored)
    assert hostile["value"]["h1"] == "Run " + _hostile_id(store)
    assert HOSTILE in hostile["value"]["body"]
