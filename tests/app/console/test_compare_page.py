"""Compare: the same statistics as `tokenpace compare` (each percentile's change with its interval,
the verdicts), every condition that differs, a repeat group standing for its runs, NOT VALID
refused unless allowed; in Chromium the overlaid CDFs hold both runs' stored TTFTs. Runs saved with
their figures are compared from them, with compare's verdicts, and the page says which method."""

from __future__ import annotations

import asyncio
from urllib.parse import urlencode

import orjson
import pytest
from aiohttp.test_utils import TestClient, TestServer

from app.console.browser import needs_chromium, visit
from app.console.console_fixtures import HOSTILE, make_store
from tokenpace.app.baseline.compare import compare_runs
from tokenpace.app.console.server import build_app
from tokenpace.core.analysis.comparison.stored_levels import STORED_METHOD, run_levels


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory):
    s = make_store(tmp_path_factory.mktemp("compare") / "runs.db")
    yield s
    s.close()


async def _json(store, *paths: str) -> list[tuple[int, dict]]:
    async with TestClient(TestServer(build_app(store), host="127.0.0.1")) as client:
        return [(r.status, await r.json()) for r in [await client.get(p) for p in paths]]


def test_the_page_says_what_tokenpace_compare_says(store) -> None:
    (s1, slower), (s2, other), (s3, group), (s4, invalid), (s5, allowed) = asyncio.run(
        _json(
            store,
            "/api/compare?a=night03&b=night10",
            "/api/compare?a=night03&b=other01",
            "/api/compare?a=rep1&b=night10",
            "/api/compare?a=night05&b=night10",
            "/api/compare?a=night05&b=night10&allow_invalid=1",
        )
    )
    cli = compare_runs(store, "night03", "night10").to_dict()
    assert s1 == 200 and slower["verdicts"]["ttft"] == cli["metrics"][0]["verdict"]
    as_json = orjson.loads(orjson.dumps(cli["metrics"], option=orjson.OPT_SERIALIZE_NUMPY))
    assert slower["metrics"] == as_json and slower["warnings"] == cli["warnings"]
    p95 = next(r for r in slower["metrics"][0]["percentiles"] if r["percentile"] == "p95")
    assert p95["rel_ci"][0] <= p95["rel"] <= p95["rel_ci"][1] and 0.2 < p95["rel"] < 0.45
    assert slower["differing_conditions"] == []  # the start time is no condition of the test
    assert s2 == 200 and {"field": "load.concurrency", "a": 4, "b": 16} in other["differing_conditions"]
    assert s3 == 200 and group["a"]["runs"] == ["rep0", "rep1", "rep2"]
    assert s4 == 400 and "NOT VALID" in invalid["error"] and "allow_invalid=1" in invalid["error"]
    assert s5 == 200 and any("NOT VALID" in w for w in allowed["warnings"])


@needs_chromium
def test_overlaid_cdfs_hold_both_runs_records(store) -> None:
    probe = (
        "JSON.stringify({verdict: document.querySelector('#verdict').innerText,"
        " cdf: [...document.querySelectorAll('div.tp-chart')].find(d => d.dataset.title === 'TTFT CDF')"
        ".data.map(t => [t.name, t.x]), pwned: window.__pwned || null, text: document.body.innerText})"
    )

    hostile = next(r.id for r in store.list_runs() if r.id.startswith("hostile"))

    async def go():
        async with TestServer(build_app(store), host="127.0.0.1") as server:
            urls = ["/compare?a=night03&b=night10", "/compare?" + urlencode({"a": "night03", "b": hostile})]
            return await visit([str(server.make_url(u)) for u in urls], probe)

    page, bad = asyncio.run(go())
    assert bad["errors"] == [] and bad["value"]["pwned"] is None and HOSTILE in bad["value"]["text"]
    assert page["errors"] == [], page["errors"]
    assert "TTFT: " in page["value"]["verdict"] and "TPOT: " in page["value"]["verdict"]
    (name_a, xa), (name_b, xb) = page["value"]["cdf"]
    assert name_a == "A: night03" and name_b == "B: night10"
    for run, xs in (("night03", xa), ("night10", xb)):
        stored = sorted((r.first_token_ns - r.sent_ns) / 1e6 for r in store.load_records(run))
        assert xs == pytest.approx(stored)


def test_runs_saved_with_their_figures_are_compared_from_them_and_the_page_says_so(tmp_path) -> None:
    store = make_store(tmp_path / "runs.db")
    bare = asyncio.run(_json(store, "/api/compare?a=night03&b=night10"))[0][1]
    assert bare["method_used"] == "exact"  # saved without figures: the bootstrap over the records
    for run in store.list_runs():  # what saving a run keeps of it today
        store.save_levels(run.id, run_levels(store.load_records(run.id)))
    (s1, stored), (s2, exact), (s3, same) = asyncio.run(
        _json(
            store,
            "/api/compare?a=night03&b=night10",
            "/api/compare?a=night03&b=night10&exact=1",
            "/api/compare?a=night02&b=night04",
        )
    )
    assert s1 == s2 == s3 == 200
    assert stored["method_used"] == "stored" and stored["method"] == STORED_METHOD
    assert exact["method_used"] == "exact" and exact["method"] != STORED_METHOD
    for a, b, page in (("night03", "night10", stored), ("night02", "night04", same)):
        cli = compare_runs(store, a, b).to_dict()
        assert page["verdicts"] == {m["metric"]: m["verdict"] for m in cli["metrics"]}
        assert page["warnings"] == cli["warnings"]
    assert stored["verdicts"]["ttft"] == exact["verdicts"]["ttft"]

    async def html() -> list[str]:
        async with TestClient(TestServer(build_app(store), host="127.0.0.1")) as client:
            urls = ("/compare?a=night03&b=night10", "/compare?a=night03&b=night10&exact=1")
            return [await (await client.get(u)).text() for u in urls]

    fast, slow = asyncio.run(html())
    assert "Method: the figures stored with each run" in fast and "exact=1" in fast
    assert "Method: the bootstrap over the records" in slow and "the stored figures' view" in slow
    store.close()
