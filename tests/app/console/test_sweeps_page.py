"""The sweeps pages: stored sweeps listed; one sweep's curves with its knee, watermark, SLO line and
the replicas for a peak, from its steps read back from the store; its JSON twin; 404 and 400; in
Chromium, no console error and each curve holds the stored steps' percentiles."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from urllib.parse import quote

import numpy as np
import pytest
from aiohttp.test_utils import TestClient, TestServer
from baseline_fixtures import make_record

from app.console.browser import needs_chromium, visit
from app.console.console_fixtures import CONDITIONS
from tokenpace.adapters.store import Store, connect
from tokenpace.app.console.server import build_app
from tokenpace.core.metrics import summarize

# a server that saturates: latency climbs past the knee (concurrency, TTFT ms; E2E is TTFT + 70 ms)
LADDER = ((1, 100.0), (2, 104.0), (4, 115.0), (8, 220.0), (16, 450.0))
SWEEP = "sw1"


def _store_sweep(store: Store) -> None:
    rng = np.random.default_rng(3)
    for n, (c, ttft) in enumerate(LADDER, start=1):
        rps = 0.95 * c / ((ttft + 70) / 1000)  # Little's law holds: in flight just under c
        records = [make_record(i, ttft * rng.lognormal(0, 0.05)) for i in range(400)]
        summary = summarize(records).to_dict() | {"request_throughput": rps, "window_s": 60.0}
        load = CONDITIONS["load"] | {"concurrency": c}  # type: ignore[operator]
        conditions = CONDITIONS | {
            "load": load,
            "slo": {"ttft_ms": 300.0},
            "started_at": f"2026-02-01T00:0{n}:00+00:00",
        }
        labels = {"sweep_id": SWEEP, "sweep_step": str(n)}
        store.save_run(f"{SWEEP}-{n:02d}", conditions, summary, records, kind="sweep", labels=labels)
    # the third step run again at the end (a drift check): it holds, so the knee stands
    records = [make_record(i, 115.0 * rng.lognormal(0, 0.05)) for i in range(400)]
    summary = summarize(records).to_dict() | {"request_throughput": 0.95 * 4 / 0.185, "window_s": 60.0}
    conditions = CONDITIONS | {"slo": {"ttft_ms": 300.0}, "started_at": "2026-02-01T00:06:00+00:00"}
    revisit = {"sweep_id": SWEEP, "sweep_step": "6", "sweep_phase": "revisit"}
    store.save_run(f"{SWEEP}-06", conditions, summary, records, kind="sweep", labels=revisit)


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Store, str]]:
    store = connect(f"sqlite:///{tmp_path_factory.mktemp('sweeps') / 'runs.db'}")
    _store_sweep(store)
    yield store, SWEEP
    store.close()


def _get(store: Store, *paths: str) -> list[tuple[int, dict]]:
    async def go():
        async with TestClient(TestServer(build_app(store), host="127.0.0.1")) as client:
            out = []
            for p in paths:
                resp = await client.get(p)
                out.append((resp.status, await resp.json()))
            return out

    return asyncio.run(go())


def test_the_json_twins_list_the_sweep_and_plan_it_for_a_peak(swept) -> None:
    store, sweep_id = swept
    (s1, listed), (s2, one), (s3, _), (s4, bad) = _get(
        store,
        "/api/sweeps",
        f"/api/sweeps/{sweep_id}?peak=40",
        "/api/sweeps/nope",
        f"/api/sweeps/{sweep_id}?peak=x",
    )
    assert s1 == 200 and [s["sweep_id"] for s in listed["sweeps"]] == [sweep_id]
    assert listed["sweeps"][0]["steps"] == 5
    assert listed["sweeps"][0]["loads"] == [f"concurrency {c}" for c, _ in LADDER]
    assert s2 == 200 and one["peak_rps"] == 40 and one["slo"]["ttft_ms"] == 300
    assert len(one["step_runs"]) == 5 and len(one["steps_table"]["rows"]) == 5
    assert one["analysis"]["knee"] is not None and one["plan"]["watermark_rps_per_replica"]
    assert any("revisited" in line for line in one["plan_lines"])  # the drift check read back
    assert one["plan"]["peak_rps"] == 40 and "_doc" not in one
    assert any("replica" in line.lower() for line in one["plan_lines"]), one["plan_lines"]
    assert s3 == 404 and s4 == 400 and "peak" in bad["error"]


@needs_chromium
def test_the_sweep_page_draws_the_stored_percentiles_with_no_error(swept) -> None:
    store, sweep_id = swept
    probe = (
        "JSON.stringify(Object.fromEntries([...document.querySelectorAll('div.tp-chart')]"
        ".map(d => [d.dataset.title, {traces: d.data.map(t => ({name: t.name, y: t.y})),"
        " shapes: (d.layout.shapes || []).length}])))"
    )

    async def go():
        async with TestServer(build_app(store), host="127.0.0.1") as server:
            urls = [str(server.make_url(p)) for p in ("/sweeps", f"/sweeps/{quote(sweep_id)}?peak=40")]
            return await visit(urls, probe)

    listing, page = asyncio.run(go())
    for p in (listing, page):
        assert p["errors"] == [], p["errors"]
        assert all(u.startswith("http://127.0.0.1:") for u in p["requests"]), p["requests"]
    charts = page["value"]
    assert set(charts) == {"TTFT vs load", "E2E vs load", "TPOT vs load", "Throughput and goodput per step"}
    ttft = {t["name"]: t["y"] for t in charts["TTFT vs load"]["traces"]}
    runs = [r for r in store.list_runs({"sweep_id": sweep_id}, full=True) if "sweep_phase" not in r.labels]
    stored = [r.summary["ttft_ms"]["p95"] for r in sorted(runs, key=lambda r: int(r.labels["sweep_step"]))]
    assert ttft["TTFT P95"] == pytest.approx(stored)  # every step usable: each drawn as stored
    assert charts["TTFT vs load"]["shapes"] == 3  # the knee, the safe watermark, the SLO line
