"""The runs page: filters by label, condition, validity, kind and time, bounded pages, its JSON
twin, and in Chromium a hostile label shown as text with no console error and nothing fetched
from elsewhere."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer

from app.console.browser import needs_chromium, visit
from app.console.console_fixtures import HOSTILE, LONG, make_store
from tokenpace.app.console.server import build_app


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory):
    s = make_store(tmp_path_factory.mktemp("console") / "runs.db")
    yield s
    s.close()


async def _get_json(store, *paths: str) -> list[tuple[int, dict]]:
    async with TestClient(TestServer(build_app(store), host="127.0.0.1")) as client:
        out = []
        for path in paths:
            resp = await client.get(path)
            out.append((resp.status, await resp.json()))
        return out


def test_filters_select_runs_and_pages_stay_bounded(store) -> None:
    (s1, all_runs), (s2, nightly), (s3, invalid), (s4, group), (s5, page2), (s6, bad), (s7, big) = (
        asyncio.run(
            _get_json(
                store,
                "/api/runs",
                "/api/runs?label=test=nightly&cond=load.concurrency=4",
                "/api/runs?valid=no",
                "/api/runs?kind=repeat",
                "/api/runs?label=test=nightly&size=5&page=2",
                "/api/runs?cond=nokey",
                "/api/runs?size=100000",
            )
        )
    )
    assert s1 == s2 == s3 == s4 == s5 == 200
    assert all_runs["total"] == 19 and all_runs["runs"][0]["id"].startswith("hostile")  # newest first
    assert nightly["total"] == 14 and {r["id"] for r in nightly["runs"]} == {
        f"night{d:02d}" for d in range(1, 15)
    }
    assert [r["id"] for r in invalid["runs"]] == ["night05"] and invalid["runs"][0]["invalid_reasons"]
    assert {r["id"] for r in group["runs"]} == {"rep0", "rep1", "rep2"}
    assert all(r["repeat_group"] == "grp1" for r in group["runs"])
    assert [r["id"] for r in page2["runs"]] == [
        f"night{d:02d}" for d in (10, 9, 8, 7, 6)
    ]  # other01 first: 15 in all
    assert page2["pages"] == 3 and "page=3" in page2["next"] and "page=1" in page2["prev"]
    row = nightly["runs"][0]
    ttft_p95 = row["headline"]["TTFT"][1]
    assert ttft_p95["name"] == "p95" and ttft_p95["ci95"][0] <= ttft_p95["value"] <= ttft_p95["ci95"][1]
    assert row["load"] == "concurrency 4" and row["api"] == "openai-chat"
    assert s6 == 400 and "KEY=VALUE" in bad["error"]
    assert s7 == 400 and "size" in big["error"]


def test_since_and_until_bound_the_start_time(store) -> None:
    [(status, data)] = asyncio.run(_get_json(store, "/api/runs?since=2026-01-10&until=2026-01-12T12:00"))
    assert status == 200 and [r["id"] for r in data["runs"]] == ["night12", "night11", "night10"]


async def _browse(store, paths: list[str], probe: str) -> list[dict]:
    async with TestServer(build_app(store), host="127.0.0.1") as server:
        return await visit([str(server.make_url(p)) for p in paths], probe)


@needs_chromium
def test_runs_page_shows_a_hostile_label_as_text_without_errors(store, tmp_path: Path) -> None:
    probe = (
        "JSON.stringify({pwned: window.__pwned || null, imgs: document.querySelectorAll('img').length,"
        " rows: document.querySelectorAll('#runs tbody tr').length,"
        " text: document.querySelector('#runs tbody tr').innerText})"
    )
    [page] = asyncio.run(_browse(store, ["/runs"], probe))
    assert page["errors"] == [], page["errors"]
    assert all(u.startswith("http://127.0.0.1:") for u in page["requests"]), page["requests"]
    value = page["value"]
    assert value["pwned"] is None and value["imgs"] == 0 and value["rows"] == 19
    assert f"test={HOSTILE}" in value["text"] and LONG in value["text"]
    assert json.dumps(value)  # the probe read the page back
