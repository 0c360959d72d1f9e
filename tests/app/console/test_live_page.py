"""The live pages: runs in progress and lately ended with their figures so far, one live run's JSON
twin, 404 for none; in Chromium, a real bench run followed until it ends: its page updated from the
store at the run's publishes, in order and most of them since it opened (the updates seen in the
DOM), the final figures and the link to the stored run, no error."""

from __future__ import annotations

import asyncio
import itertools
import subprocess
import time
from pathlib import Path
from urllib.parse import quote

from aiohttp.test_utils import TestClient, TestServer

from app.console.browser import follow, needs_chromium
from app.console.console_fixtures import HOSTILE
from tokenpace.adapters.store import connect
from tokenpace.app.console.live_page import STALE_S
from tokenpace.app.console.server import build_app
from tokenpace.core.analysis.diagnosis.live_figures import ClientNow, LiveFigures
from tokenpace.testing.procs import cli_command


def test_the_json_twins_list_running_and_ended_runs_and_one_runs_figures(tmp_path: Path) -> None:
    store = connect(f"sqlite:///{tmp_path / 'runs.db'}")
    figures = LiveFigures().fold([], 1.0, ClientNow(in_flight=3)).to_dict()
    store.start_live("going", "bench", {"test": HOSTILE})
    store.publish_live("going", figures)
    store.start_live("done", "sweep", {"sweep_id": "s1"})
    store.publish_live("done", figures, state="completed", ended=True)

    async def go():
        async with TestClient(TestServer(build_app(store), host="127.0.0.1")) as client:
            listed = await (await client.get("/api/live")).json()
            one = await (await client.get("/api/live/going")).json()
            missing = await client.get("/api/live/nope")
            page = await client.get("/live")
            return listed, one, missing.status, await page.text()

    listed, one, missing, page = asyncio.run(go())
    assert [r["run_id"] for r in listed["running"]] == ["going"]
    assert [(r["run_id"], r["state"]) for r in listed["ended"]] == [("done", "completed")]
    assert one["run"]["in_flight"] == 3 and one["figures"]["in_flight"] == 3 and one["stored"] is False
    assert missing == 404
    assert HOSTILE not in page and "&lt;script&gt;" in page  # a hostile label is text


def test_a_run_that_stopped_publishing_is_shown_as_dead(tmp_path: Path) -> None:
    store = connect(f"sqlite:///{tmp_path / 'runs.db'}")
    store.start_live("killed", "bench", {})
    import sqlalchemy as sa

    from tokenpace.adapters.store import schema as s

    with store.engine.begin() as conn:  # type: ignore[attr-defined]
        t = s.live_runs
        conn.execute(sa.update(t).values(updated_unix=time.time() - STALE_S - 5))

    async def go():
        async with TestClient(TestServer(build_app(store), host="127.0.0.1")) as client:
            return await (await client.get("/api/live")).json()

    listed = asyncio.run(go())
    assert listed["running"] == [] and listed["ended"][0]["stale"] is True
    assert "may have died" in listed["ended"][0]["state"]


def _positions(seen: list[int], published: list[int]) -> list[int] | None:
    """Where each count the page showed lies among the published ones, in order (None: it showed
    one never published, or out of order)."""
    at, out = 0, []
    for v in seen:
        while at < len(published) and published[at] != v:
            at += 1
        if at == len(published):
            return None
        out.append(at)
        at += 1
    return out


@needs_chromium
def test_a_live_run_updates_its_page_at_its_publishes_until_it_ends(threaded_server, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    store = connect(url)
    args = ("bench", "--url", threaded_server.url, "--model", "ok", "-c", "2", "--duration", "8", "-q")
    procs: list[subprocess.Popen[str]] = []
    run_ids: list[str] = []
    until = "document.getElementById('tp-live').dataset.ended === '1'"
    probe = (
        "JSON.stringify({root: {...document.getElementById('tp-live').dataset},"
        " state: document.querySelector('[data-live=state]').textContent,"
        " done: document.querySelector('[data-live=done]').textContent,"
        " stored: !document.querySelector('[data-live=stored-link]').hidden,"
        " t: document.getElementById('tp-fig-1').data[0].x})"
    )

    async def go():
        async with TestServer(build_app(store), host="127.0.0.1") as server:

            async def start() -> str:  # the run starts once the browser is up
                procs.append(subprocess.Popen(
                    [*cli_command(*args), "--store", url], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                    text=True, cwd=tmp_path,
                ))  # fmt: skip
                for _ in range(600):  # until its row is there: the child's start-up, a liveness bound
                    if store.live_runs():
                        break
                    await asyncio.sleep(0.1)
                (live,) = store.live_runs()
                run_ids.append(live.run_id)
                return str(server.make_url("/live/" + quote(live.run_id, safe="")))

            return await follow(start, until, probe)

    try:
        page = asyncio.run(go())
        (proc,) = procs
        proc.communicate(timeout=60)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert proc.returncode in (0, 3)  # 3: NOT VALID, a client starved by the browser beside it
    assert page["errors"] == [], page["errors"]
    assert all(u.startswith("http://127.0.0.1:") for u in page["requests"]), page["requests"]
    value = page["value"]
    (run_id,) = run_ids
    final = store.get_live(run_id)
    stored = store.get_run(run_id)
    assert final is not None and final.ended and stored is not None
    # each publish adds one point to the series: the counts done after each, in order
    published = list(itertools.accumulate(p["done"] for p in final.figures["series"]))
    seen = [int(v) for v in value["root"]["seen"].split(",") if v]
    at = _positions(seen, published)
    # the page showed published figures only, in order, to the last; it updated at most of the
    # publishes made since it first showed one (an 8 s run publishes about every second; a page
    # polling every half second misses one only when its browser is held up)
    assert at is not None and at[-1] == len(published) - 1, (seen, published)
    assert len(seen) >= 3 and 2 * len(seen) >= len(published) - at[0], (seen, published)
    assert int(value["root"]["updates"]) == len(seen)
    assert seen[-1] == final.figures["done"] == stored.summary["counts"]["sent"]
    assert value["state"] == "completed" and value["stored"] is True
    assert int(value["done"].replace(",", "")) == final.figures["done"]
    assert value["t"] == [p["t"] for p in final.figures["series"]]  # the chart holds the stored points
