"""Replicas sharing a store (fleet_sync.py), in one process: a change made through one replica runs
on every replica under the same epoch and routes each user to the same arm everywhere; a replica
that starts later takes the fleet's configuration, not its own first one; a changed configuration
file (swapped behind a symlink, as Kubernetes swaps a ConfigMap) is applied with no signal."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

import aiohttp

from tokenpace.adapters.store import Store, connect
from tokenpace.core.record import RequestRecord
from tokenpace.gateway.config.config import GatewayConfig, parse_upstream
from tokenpace.gateway.lifecycle.fleet_sync import FleetLink, Follow
from tokenpace.gateway.lifecycle.serve import RunningGateway
from tokenpace.testing.scripted_server import Script, ScriptedServer

KEY = "admin-key-for-tests"
AUTH = {"Authorization": f"Bearer {KEY}"}
CHAT: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
DEADLINE_S = 10.0  # generous: the design's bound is one poll (0.3 s) plus a query and a swap


def _config(urls: dict[str, str], weights: dict[str, float]) -> GatewayConfig:
    ups = tuple(parse_upstream(f"{arm}={urls[arm]},weight={w}") for arm, w in weights.items())
    return GatewayConfig(upstreams=ups, port=0, admin_keys=frozenset({KEY}))


async def _page(s: aiohttp.ClientSession, gw: RunningGateway) -> dict[str, Any]:
    async with s.get(gw.admin_url + "/tokenpace/config", headers=AUTH) as r:
        assert r.status == 200
        page: dict[str, Any] = await r.json()
        return page


async def _until_epoch(s: aiohttp.ClientSession, gws: list[RunningGateway], epoch: int) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while [(await _page(s, gw))["epoch"] for gw in gws] != [epoch] * len(gws):
        assert time.monotonic() < deadline, "a replica did not take the fleet's epoch"
        await asyncio.sleep(0.05)


async def _arms(s: aiohttp.ClientSession, gw: RunningGateway, records: list[RequestRecord]) -> dict[str, str]:
    """Each of 40 users' arm through this replica (from its records, each found by its request id)."""
    tag = f"{id(gw)}-{len(records)}"
    for i in range(40):
        headers = {"x-user-id": f"u{i}", "x-request-id": f"{tag}-u{i}"}
        async with s.post(gw.url + "/v1/chat/completions", json=CHAT, headers=headers) as r:
            assert r.status == 200
            await r.read()
    deadline = time.monotonic() + DEADLINE_S
    while True:
        out = {
            r.labels["client_request_id"].removeprefix(f"{tag}-"): r.labels["arm"]
            for r in records
            if r.labels.get("client_request_id", "").startswith(f"{tag}-")
        }
        if len(out) == 40:
            return out
        assert time.monotonic() < deadline, "records missing"
        await asyncio.sleep(0.01)


def test_a_change_through_one_replica_runs_on_all(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    stores: list[Store] = []

    def replica(urls: dict[str, str], i: int, records: list[RequestRecord]) -> RunningGateway:
        stores.append(connect(url))
        link = FleetLink(stores[-1], "prod", f"session{i}", f"r{i}")
        return RunningGateway(
            _config(urls, {"a": 99, "b": 1}), on_record=records.append, follow=Follow(link=link)
        )

    async def main() -> None:
        async with ScriptedServer(Script(ttft_s=0.001, itl_s=0.001)) as a, ScriptedServer(Script()) as b:
            urls = {"a": a.url, "b": b.url}
            records: list[list[RequestRecord]] = [[], [], [], []]
            gws = [await replica(urls, i, records[i]).start() for i in range(3)]
            try:
                async with aiohttp.ClientSession() as s:
                    for epoch, weights in enumerate(({"b": 50, "a": 50}, {"b": 0, "a": 100}), start=1):
                        change = {"weights": weights, "by": "test"}
                        async with s.post(
                            gws[1].admin_url + "/tokenpace/config", json=change, headers=AUTH
                        ) as r:
                            answer = await r.json()
                            assert r.status == 200 and answer["epoch"] == epoch, answer
                        await _until_epoch(s, gws, epoch)
                        for gw in gws:
                            page = await _page(s, gw)
                            assert {u["arm"]: u["weight"] for u in page["split"]} == weights
                        seen = [await _arms(s, gw, records[i]) for i, gw in enumerate(gws)]
                        assert seen[0] == seen[1] == seen[2]
                        assert {r.labels["config_epoch"] for rs in records[:3] for r in rs[-40:]} == {
                            str(epoch)
                        }
                    for gw in gws:  # the dashboard's fleet variable: every sample names the fleet
                        async with s.get(gw.admin_url + "/metrics", headers=AUTH) as r:
                            samples = [ln for ln in (await r.text()).splitlines() if ln and ln[0] != "#"]
                        assert samples and all('gateway_fleet="prod"' in ln for ln in samples)
                    late = await replica(urls, 3, records[3]).start()  # its own file says a=99, b=1
                    gws.append(late)
                    page = await _page(s, late)
                    assert page["epoch"] == 2 and {u["arm"]: u["weight"] for u in page["split"]} == weights
                    assert page["weights_set_live"] == weights and page["replica"] == "r3"
                    assert set((await _arms(s, late, records[3])).values()) == {"a"}
            finally:
                for gw in gws:
                    await gw.stop()

    asyncio.run(main())
    changes = stores[0].load_config_changes(0)
    assert [(c.epoch, c.session) for c in changes] == [(1, "session1"), (2, "session1")]  # one row each
    for store in stores:
        store.close()


def test_a_file_swapped_behind_a_symlink_is_applied(tmp_path: Path) -> None:
    """As a ConfigMap volume: gateway.toml -> ..data/gateway.toml, ..data -> a timestamped dir."""
    for version, weight in (("v1", 1), ("v2", 60)):
        (tmp_path / version).mkdir()
        (tmp_path / version / "gateway.toml").write_text(f"{weight}\n")
    (tmp_path / "..data").symlink_to("v1")
    (tmp_path / "gateway.toml").symlink_to("..data/gateway.toml")
    path = str(tmp_path / "gateway.toml")

    async def main() -> None:
        async with ScriptedServer(Script()) as up:
            urls = {"a": up.url, "b": up.url}

            def load() -> GatewayConfig:
                return _config(urls, {"a": 100, "b": float(Path(path).read_text())})

            gw = RunningGateway(load(), load=load, follow=Follow(path=path))
            async with gw, aiohttp.ClientSession() as s:
                assert (await _page(s, gw))["epoch"] == 0
                (tmp_path / "..tmp").symlink_to("v2")
                os.replace(tmp_path / "..tmp", tmp_path / "..data")  # the atomic swap kubelet makes
                deadline = time.monotonic() + DEADLINE_S
                while (page := await _page(s, gw))["epoch"] != 1:
                    assert time.monotonic() < deadline, "the changed file was not applied"
                    await asyncio.sleep(0.05)
                assert {u["arm"]: u["weight"] for u in page["split"]} == {"a": 100, "b": 60}
                await asyncio.sleep(2.5)  # two more looks at an unchanged file: no new epoch
                assert (await _page(s, gw))["epoch"] == 1

    asyncio.run(main())


def _configmap(root: Path, weight: float) -> str:
    """A ConfigMap volume: gateway.toml -> ..data/gateway.toml, ..data -> a timestamped dir."""
    (root / "v1").mkdir(parents=True)
    (root / "v1" / "gateway.toml").write_text(f"{weight}\n")
    (root / "..data").symlink_to("v1")
    (root / "gateway.toml").symlink_to("..data/gateway.toml")
    return str(root / "gateway.toml")


def _update(root: Path, weight: float, version: str = "v2") -> None:
    """The kubelet's update: a new dir, then ``..data`` swapped to it in one rename."""
    (root / version).mkdir()
    (root / version / "gateway.toml").write_text(f"{weight}\n")
    (root / "..tmp").symlink_to(version)
    os.replace(root / "..tmp", root / "..data")


def test_a_configmap_update_reaches_the_whole_fleet_as_one_epoch(tmp_path: Path) -> None:
    """Each replica watches its own copy of the ConfigMap (as each pod mounts it); the update lands on
    all three with no signal: one change, one epoch, every replica routing each user to the same arm.
    A pod that starts with a file newer than the fleet's (changed while it was replaced) applies it
    to the whole fleet."""
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    roots = [tmp_path / f"pod{i}" for i in range(3)]
    paths = [_configmap(root, 0) for root in roots]

    async def main() -> None:
        async with ScriptedServer(Script()) as a, ScriptedServer(Script()) as b:
            urls = {"a": a.url, "b": b.url}
            records: list[list[RequestRecord]] = [[], [], []]
            gws: list[RunningGateway] = []

            def pod(i: int) -> RunningGateway:
                def load() -> GatewayConfig:
                    return _config(urls, {"a": 100, "b": float(Path(paths[i]).read_text())})

                link = FleetLink(connect(url), "prod", f"session{i}-{len(gws)}", f"r{i}")
                return RunningGateway(
                    load(), load=load, on_record=records[i].append, follow=Follow(paths[i], link)
                )

            for i in range(3):
                gws.append(await pod(i).start())
            try:
                async with aiohttp.ClientSession() as s:
                    await _until_epoch(s, gws, 0)
                    for root in roots:
                        _update(root, 50)
                    await _until_epoch(s, gws, 1)
                    for gw in gws:
                        page = await _page(s, gw)
                        assert {u["arm"]: u["weight"] for u in page["split"]} == {"a": 100, "b": 50}
                    seen = [await _arms(s, gw, records[i]) for i, gw in enumerate(gws)]
                    assert seen[0] == seen[1] == seen[2] and set(seen[0].values()) == {"a", "b"}
                    await asyncio.sleep(2.5)  # each replica looked at its file again: nothing new
                    assert [(await _page(s, gw))["epoch"] for gw in gws] == [1, 1, 1]
                    await gws.pop().stop()  # pod 2 replaced while its ConfigMap moved on
                    _update(roots[2], 70, "v3")
                    gws.append(await pod(2).start())
                    await _until_epoch(s, gws, 2)
                    for gw in gws:
                        page = await _page(s, gw)
                        assert {u["arm"]: u["weight"] for u in page["split"]} == {"a": 100, "b": 70}
            finally:
                for gw in gws:
                    await gw.stop()

    asyncio.run(main())
    store = connect(url)
    assert [c.epoch for c in store.load_config_changes(0)] == [1, 2]  # each made by one replica, once
    store.close()


def test_two_changes_at_once_through_two_replicas_both_apply_one_after_the_other(tmp_path: Path) -> None:
    """The one that lost the compare-and-set is tried again on top of the winner: two epochs, and
    every replica ends on the later one."""
    url = f"sqlite:///{tmp_path / 'runs.db'}"

    async def main() -> None:
        async with ScriptedServer(Script()) as up:
            urls = {"a": up.url, "b": up.url}
            gws = []
            for i in range(3):
                link = FleetLink(connect(url), "prod", f"session{i}", f"r{i}")
                gws.append(
                    await RunningGateway(_config(urls, {"a": 99, "b": 1}), follow=Follow(link=link)).start()
                )
            try:
                async with aiohttp.ClientSession() as s:

                    async def move(gw: RunningGateway, b: float) -> dict[str, Any]:
                        change = {"weights": {"b": b}, "by": "test"}
                        async with s.post(gw.admin_url + "/tokenpace/config", json=change, headers=AUTH) as r:
                            assert r.status == 200
                            answer: dict[str, Any] = await r.json()
                            return answer

                    answers = await asyncio.gather(move(gws[0], 20), move(gws[1], 40))
                    assert sorted(a["epoch"] for a in answers) == [1, 2] and all(
                        a["applied"] for a in answers
                    )
                    last = max(answers, key=lambda a: a["epoch"])
                    await _until_epoch(s, gws, 2)
                    for gw in gws:
                        page = await _page(s, gw)
                        assert page["split"] == last["config"]["split"]
            finally:
                for gw in gws:
                    await gw.stop()

    asyncio.run(main())
