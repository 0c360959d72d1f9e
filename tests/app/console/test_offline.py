"""`report --compare A B --html` and `report --history RUN --html`: the console's pages as one
offline file each, the same data as the served pages, plotly inside; in Chromium from file://,
nothing fetched, no error, the charts drawn with the stored points. Refusals are one line, exit 2."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer
from baseline_fixtures import tokenpace

from app.console.browser import needs_chromium, visit
from app.console.console_fixtures import make_store
from tokenpace.app.console.server import build_app


@pytest.fixture(scope="module")
def store_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("offline") / "runs.db"
    make_store(path).close()
    return path


def test_report_writes_compare_and_history_pages(store_path: Path, tmp_path: Path) -> None:
    cmp_file, hist_file = tmp_path / "cmp.html", tmp_path / "hist.html"
    store = ["--store", str(store_path)]
    done = tokenpace("report", "--compare", "night03", "night10", "--html", str(cmp_file), *store)
    assert done.returncode == 0, done.stderr
    done = tokenpace("report", "--history", "night03", "--html", str(hist_file), *store)
    assert done.returncode == 0, done.stderr
    for page in (cmp_file, hist_file):
        text = page.read_text()
        assert 'id="tp-plotly"' in text and 'src="http' not in text and 'src="/static' not in text
    assert "P95 TTFT shifted +3" in hist_file.read_text()
    missing = tokenpace("report", "--history", "nope", "--html", str(tmp_path / "x.html"), *store)
    assert missing.returncode == 2 and "no stored run" in missing.stderr and "Traceback" not in missing.stderr
    both = tokenpace("report", "--history", "night03", "--md", str(tmp_path / "x.md"), *store)
    assert both.returncode == 2 and "--html FILE and nothing else" in both.stderr


@needs_chromium
def test_offline_pages_draw_the_console_data_from_file(store_path: Path, tmp_path: Path) -> None:
    hist_file, cmp_file = tmp_path / "hist.html", tmp_path / "cmp.html"
    done = tokenpace("report", "--history", "night03", "--html", str(hist_file), "--store", str(store_path))
    assert done.returncode == 0, done.stderr
    done = tokenpace(
        "report", "--compare", "night03", "night10", "--html", str(cmp_file), "--store", str(store_path)
    )
    assert done.returncode == 0, done.stderr
    probe = (
        "JSON.stringify({headline: document.querySelector('.headline').innerText,"
        " ys: document.querySelector('div.tp-chart').data[0].y, charts: +document.body.dataset.drawn})"
    )
    page, cmp_page = asyncio.run(visit([hist_file.as_uri(), cmp_file.as_uri()], probe))
    for p in (page, cmp_page):
        assert p["errors"] == [], p["errors"]
        assert all(u.startswith(("file:", "data:")) for u in p["requests"]), p["requests"]
    assert cmp_page["value"]["charts"] == 4 and "TTFT: " in cmp_page["value"]["headline"]

    async def api() -> dict:
        from tokenpace.adapters.store import connect

        store = connect(str(store_path))
        try:
            async with TestClient(TestServer(build_app(store), host="127.0.0.1")) as client:
                return await (await client.get("/api/history?run=night03")).json()
        finally:
            store.close()

    served = asyncio.run(api())
    assert page["value"]["headline"] == served["series"][0]["headline"]
    assert page["value"]["ys"] == pytest.approx(
        [p["value"] for p in served["series"][0]["points"] if p["valid"]]
    )
