"""The gateway sessions and rollouts pages over a rollout a real gateway stored (a split moved live,
complaints reported): the session listed, its arms over time and each step's verdict in the JSON
twin (the verdict `tokenpace arms` gives on that step), 404 and 400; the answer kept until the
session gains records; the session read once for every guard tried (the same verdicts as a fresh
read) until it gains records; in Chromium, no console error and the charts hold the stored points."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import orjson
import pytest
from aiohttp.test_utils import TestClient, TestServer

from app.console.browser import needs_chromium, visit
from app.rollout.arms_traffic import SESSION, store_rollout
from tokenpace.adapters.store import Store, connect
from tokenpace.adapters.store.protocol import RunInfo
from tokenpace.app.console import rollouts_page
from tokenpace.app.console.page import Ask
from tokenpace.app.console.rollouts_page import rollout_data, sessions_data
from tokenpace.app.console.routes import PAGES
from tokenpace.app.console.server import Console, build_app
from tokenpace.app.rollout.arms import ArmsQuery, Traffic, arms_report, read_traffic
from tokenpace.core.analysis.rollout.guards import parse_guards
from tokenpace.testing.procs import run_cli


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("rollouts") / "runs.db"
    s = connect(f"sqlite:///{path}")
    store_rollout(s)
    s.close()
    return path


@pytest.fixture(scope="module")
def store(db: Path) -> Iterator[Store]:
    s = connect(f"sqlite:///{db}")
    yield s
    s.close()


def _get(store: Store, *paths: str) -> list[tuple[int, dict]]:
    async def go():
        async with TestClient(TestServer(build_app(store), host="127.0.0.1")) as client:
            out = []
            for p in paths:
                resp = await client.get(p)
                out.append((resp.status, await resp.json()))
            return out

    return asyncio.run(go())


def test_the_sessions_list_names_its_arms_in_order_whatever_order_they_were_stored() -> None:
    def run(arm: str, epoch: str) -> RunInfo:
        labels = {"gateway_session": "s", "arm": arm, "config_epoch": epoch}
        return RunInfo(
            arm + epoch, "gateway", "2026-12-01T00:00:00", 0.0, 0.0, None, None, None, False, True,
            None, 10, labels,
        )  # fmt: skip

    class Listed:  # newest first, as the store lists them: b's run was stored last
        def list_runs(self, where: dict[str, str], limit: int) -> list[RunInfo]:
            return [run("b", "1"), run("a", "1"), run("b", "0")]

    (row,) = sessions_data(Listed(), Ask({}, {}))["sessions"]  # type: ignore[arg-type]
    assert row["arms"] == ["a", "b"] and row["requests"] == 30 and row["config_changes"] == 1


def test_the_json_twins_list_the_session_and_its_arms_over_time(store: Store) -> None:
    guard = quote("ttft.p95=+50%,complaint=+5pp")
    (s1, listed), (s2, one), (s3, _), (s4, bad) = _get(
        store, "/api/rollouts", f"/api/rollouts/{SESSION}?guard={guard}", "/api/rollouts/nope",
        f"/api/rollouts/{SESSION}?guard=ttft.p95",
    )  # fmt: skip
    assert s1 == 200 and listed["sessions"][0]["session"] == SESSION
    assert listed["sessions"][0]["arms"] == ["a", "b"] and listed["sessions"][0]["config_changes"] == 1
    assert listed["sessions"][0]["requests"] == 400
    assert s2 == 200
    arms = one["timeline"]["arms"]
    assert sum(sum(a["requests"]) for a in arms.values()) == 400
    assert one["changes"][0]["epoch"] == 1 and one["changes"][0]["split_after"] == {"a": 50.0, "b": 50.0}
    assert len(one["steps"]) == 2 and len(one["steps_table"]["rows"]) == 2
    assert {g["guard"] for s in one["steps"] for g in s["guards"]} == {"ttft.p95=+50%", "complaint=+5pp"}
    assert s3 == 404 and s4 == 400 and bad["error"].startswith("guard:")


def test_each_steps_verdict_is_the_one_arms_gives_on_that_window(db: Path, store: Store) -> None:
    text = "ttft.p95=+50%,e2e.p99=+50%,complaint=+5pp,error_rate=+1pp"
    ((status, one),) = _get(store, f"/api/rollouts/{SESSION}?guard={quote(text)}")
    assert status == 200 and len(one["steps"]) == 2
    first, newest = one["steps"]
    # the newest step is what `tokenpace arms` judges (since the split's last move), with its defaults
    done = run_cli(
        "arms", "--store", str(db), "--since", "1d", "--session", SESSION, "--guard", text, "--json"
    )
    assert done.returncode in (0, 1, 5) and "Traceback" not in done.stderr, done.stderr
    cli = orjson.loads(done.stdout)
    assert (newest["verdict"], newest["reason"], newest["reference"]) == (
        cli["verdict"], cli["reason"], cli["reference"],
    )  # fmt: skip
    assert newest["guards"] == cli["guards"] and len(cli["guards"]) == 4  # the same intervals, to the digit
    assert any(g["ci"] for g in cli["guards"])  # judged on measured intervals
    # the step before the move: what arms gives on that window (the call the CLI makes)
    query = ArmsQuery(first["since_unix"], first["until_unix"], tuple(parse_guards(text)), session=SESSION)
    _, report = arms_report(store, query)
    assert (first["verdict"], first["reason"]) == (report.verdict, report.reason)
    assert first["guards"] == [g.to_dict() for g in report.guards]


@needs_chromium
def test_the_rollout_page_draws_the_stored_points_with_no_error(store: Store) -> None:
    probe = (
        "JSON.stringify(Object.fromEntries([...document.querySelectorAll('div.tp-chart')]"
        ".map(d => [d.dataset.title, {traces: d.data.map(t => ({name: t.name, y: t.y})),"
        " shapes: (d.layout.shapes || []).length}])))"
    )

    async def go():
        async with TestServer(build_app(store), host="127.0.0.1") as server:
            urls = [str(server.make_url(p)) for p in ("/rollouts", f"/rollouts/{SESSION}")]
            return await visit(urls, probe)

    listing, page = asyncio.run(go())
    for p in (listing, page):
        assert p["errors"] == [], p["errors"]
        assert all(u.startswith("http://127.0.0.1:") for u in p["requests"]), p["requests"]
    ((_, one),) = _get(store, f"/api/rollouts/{SESSION}")
    charts = page["value"]
    assert "Traffic share by arm" in charts and "Business events per request by arm" in charts
    for title, key in (("Traffic share by arm", "share"), ("TTFT P95 by arm", "ttft_p95")):
        drawn = {t["name"]: t["y"] for t in charts[title]["traces"]}
        assert drawn == {arm: s[key] for arm, s in one["timeline"]["arms"].items()}, title
        assert charts[title]["shapes"] == 1  # the split's move, marked


def test_the_rollout_answer_is_kept_until_the_session_gains_records(db: Path, tmp_path: Path) -> None:
    shutil.copy(db, tmp_path / "runs.db")
    store = connect(f"sqlite:///{tmp_path / 'runs.db'}")
    calls: list[int] = []

    def counted(store: Store, ask: Ask) -> dict:
        calls.append(1)
        return rollout_data(store, ask)

    page = dataclasses.replace(next(p for p in PAGES if p.name == "rollout"), data=counted)
    console = Console(store)
    first = console._answer(page, Ask([], {"session": SESSION}), api=True)
    assert console._answer(page, Ask([], {"session": SESSION}), api=False) and len(calls) == 1  # kept
    run = store.list_runs({"gateway_session": SESSION, "arm": "b"})[0]  # a running gateway appends
    late = dataclasses.replace(store.load_records(run.id)[-1], request_id="late")
    store.append_records(run.id, [late], run.record_count)
    again = orjson.loads(console._answer(page, Ask([], {"session": SESSION}), api=True))
    assert len(calls) == 2 and again != orjson.loads(first)
    assert sum(sum(a["requests"]) for a in again["timeline"]["arms"].values()) == 401
    store.close()


def test_each_guard_tried_reuses_the_sessions_read_until_it_gains_records(
    db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copy(db, tmp_path / "runs.db")
    store = connect(f"sqlite:///{tmp_path / 'runs.db'}")
    reads: list[ArmsQuery] = []
    held: list[int] = []

    def counted(store: Store, query: ArmsQuery) -> Traffic:
        reads.append(query)
        traffic = read_traffic(store, query)
        held.append(rollouts_page.held_bytes(traffic))
        return traffic

    monkeypatch.setattr(rollouts_page, "read_traffic", counted)
    page, console = next(p for p in PAGES if p.name == "rollout"), Console(store)
    asked = lambda guard: Ask([("guard", guard)] if guard else [], {"session": SESSION})  # noqa: E731
    console._answer(page, asked(""), api=False)
    text = "ttft.p95=+50%,e2e.p99=+50%,complaint=+5pp,error_rate=+1pp"
    for guard in ("ttft.p95=+10%", text):
        got = orjson.loads(console._answer(page, asked(guard), api=True))
    assert len(reads) == 1 and reads[0].guards == ()  # one read, judged under each guard asked
    fresh = rollout_data(store, asked(text))  # no console: read afresh, as offline reports do
    assert len(reads) == 1 and got["steps"] == orjson.loads(orjson.dumps(fresh["steps"]))
    assert {g["guard"] for s in got["steps"] for g in s["guards"]} == set(text.split(","))
    run = store.list_runs({"gateway_session": SESSION, "arm": "b"})[0]  # a running gateway appends
    late = dataclasses.replace(store.load_records(run.id)[-1], request_id="late")
    store.append_records(run.id, [late], run.record_count)
    again = orjson.loads(console._answer(page, asked("ttft.p95=+10%"), api=True))
    assert len(reads) == 2 and sum(sum(a["requests"]) for a in again["timeline"]["arms"].values()) == 401
    assert console.kept.held() == sum(held) and held[1] > held[0] > 400 * rollouts_page.RECORD_BYTES
    small = Console(store)
    small.kept.size_max = held[1] - 1  # a read larger than the bound is not kept: read each time
    small._answer(page, asked("ttft.p95=+30%"), api=True)
    small._answer(page, asked("ttft.p95=+40%"), api=True)
    assert len(reads) == 4 and small.kept.held() == 0
    since = Ask([("since", "1d"), ("guard", "ttft.p95=+10%")], {"session": SESSION})
    console._answer(page, since, api=True)  # a window that moves with the clock: read, not kept
    assert len(reads) == 4 and console.kept.held() == sum(held[:2])
    store.close()


_FIRST_ANSWER = """
import gc, sys
from tokenpace.adapters.store import connect
from tokenpace.app.console.page import Ask
from tokenpace.app.console.routes import PAGES
from tokenpace.app.console.server import Console, start_up

store = connect(sys.argv[1])  # opened before start-up, as `tokenpace ui` does
start_up()
assert gc.get_freeze_count() > 0, "start-up objects left to the full collections"
page = next(p for p in PAGES if p.name == "rollout")
before = set(sys.modules)
for api in (False, True):
    Console(store)._answer(page, Ask([("guard", "ttft.p95=+10%")], {"session": sys.argv[2]}), api)
print(" ".join(sorted(set(sys.modules) - before)))
"""


def test_start_up_loads_what_a_first_answer_would(db: Path) -> None:
    # a process of its own: start_up freezes the collector's view of everything alive
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    found = subprocess.run(
        [sys.executable, "-c", _FIRST_ANSWER, f"sqlite:///{db}", SESSION],
        capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert found.returncode == 0, found.stderr[-2000:]
    # the first guarded answer, HTML and JSON, loads no trace class, no numpy module, no template
    loaded = found.stdout.split()
    assert not [m for m in loaded if m.startswith(("numpy", "plotly.graph_objs._", "plotly.validators"))]
    assert not [m for m in loaded if m.startswith("jinja2") or "templates" in m], loaded
