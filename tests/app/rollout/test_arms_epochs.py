"""`tokenpace arms` over a gateway whose split moved live: the store writer keeps each config epoch
in runs of its own with that epoch's split, the change is stored, and the window starts at the
split's last change, in the same session."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import aiohttp

from tokenpace.adapters.store import connect
from tokenpace.app.rollout.arms import ArmsQuery, arms_report, change_lines
from tokenpace.core.analysis.rollout.guards import parse_guards
from tokenpace.gateway.config.config import GatewayConfig, parse_upstream
from tokenpace.gateway.lifecycle.serve import RunningGateway
from tokenpace.gateway.recording.store_writer import StoreRecordWriter
from tokenpace.testing.scripted_server import Script, ScriptedServer

CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, "stream": True}
KEY = "k"


async def _users(s: aiohttp.ClientSession, url: str, tag: str, n: int) -> None:
    async def one(i: int) -> None:
        async with s.post(url + "/v1/chat/completions", json=CHAT, headers={"x-user-id": f"{tag}-{i}"}) as r:
            assert r.status == 200
            await r.read()

    await asyncio.gather(*(one(i) for i in range(n)))


def test_each_epoch_is_stored_apart_and_arms_judges_since_the_last_move(tmp_path: Path) -> None:
    store = connect(str(tmp_path / "runs.db"))
    started = time.time() - 1

    async def main() -> None:
        async with ScriptedServer(Script(ttft_s=0.002, itl_s=0.001)) as up:
            ups = (parse_upstream(f"a={up.url},weight=90"), parse_upstream(f"b={up.url},weight=10"))
            config = GatewayConfig(upstreams=ups, port=0, admin_keys=frozenset({KEY}))
            writer = StoreRecordWriter(store, config, "sess1")
            async with RunningGateway(config, writer=writer) as gw, aiohttp.ClientSession() as s:
                await _users(s, gw.url, "before", 200)
                move = {"weights": {"a": 50, "b": 50}, "by": "a test"}
                headers = {"Authorization": f"Bearer {KEY}"}
                async with s.post(gw.admin_url + "/tokenpace/config", json=move, headers=headers) as r:
                    assert r.status == 200 and (await r.json())["epoch"] == 1
                await _users(s, gw.url, "after", 200)

    asyncio.run(main())
    runs = store.list_runs({"source": "gateway", "gateway_session": "sess1"})
    by_epoch = {(r.labels["config_epoch"], r.labels["arm"]): r for r in runs}
    assert set(by_epoch) == {("0", "a"), ("0", "b"), ("1", "a"), ("1", "b")}
    assert by_epoch[("1", "b")].id == "gw-sess1-e1-b" and by_epoch[("0", "b")].id == "gw-sess1-b"
    split = by_epoch[("1", "b")].conditions["gateway"]["split"]
    assert {u["arm"]: u["weight"] for u in split} == {"a": 50, "b": 50}
    assert sum(r.record_count for r in runs) == 400
    (change,) = store.load_config_changes(started)
    assert change.session == "sess1" and change.epoch == 1 and "a test" in change.who
    query = ArmsQuery(started, guards=tuple(parse_guards("ttft.p95=+50%")), resamples=50)
    window, report = arms_report(store, query)
    assert window.weights == {"a": 50, "b": 50}  # the epoch judged is the newest
    assert sum(len(v) for v in window.records.values()) == 200  # only the traffic since the move
    assert (
        "judged since the split's last change" in window.warnings[0]
        and "a=90, b=10 -> a=50, b=50" in window.warnings[0]
    )
    assert not any(s.flagged for s in report.srm)  # each epoch under its own weights
    (line,) = change_lines(store, started, None, "sess1")
    assert "epoch 1" in line and "a=90, b=10 -> a=50, b=50" in line
