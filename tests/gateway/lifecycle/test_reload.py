"""Live configuration changes (reload.py): 16 streams through the gateway while its config is
changed 20 times (weights, an upstream added and removed, SLOs): no stream cut, no request lost,
each change in effect as the admin surface says, the split after each within the sample-ratio
check's tolerance; an invalid change changes nothing and says why."""

from __future__ import annotations

import asyncio
import dataclasses
from collections import Counter
from typing import Any

import aiohttp

from tokenpace.core.analysis.rollout.srm import srm_check
from tokenpace.core.metrics import Slo
from tokenpace.core.record import RequestRecord
from tokenpace.gateway.config.config import GatewayConfig, parse_upstream
from tokenpace.gateway.lifecycle.serve import RunningGateway
from tokenpace.testing.scripted_server import Script, ScriptedServer

KEY = "admin-key-for-tests"
AUTH = {"Authorization": f"Bearer {KEY}"}
STREAMS = 16
RELOADS = 20
BURST = 160  # users sent after each change, to check its split
# Each change: the arms' weights (c joins and leaves) and the TTFT SLO, in ms.
PLANS: list[tuple[dict[str, float], int]] = [
    ({"a": 90, "b": 10}, 500),
    ({"a": 75, "b": 25}, 600),
    ({"a": 50, "b": 50}, 700),
    ({"a": 40, "b": 40, "c": 20}, 700),
    ({"a": 20, "b": 60, "c": 20}, 800),
    ({"a": 30, "b": 70}, 800),
    ({"a": 0, "b": 100}, 900),
    ({"a": 60, "b": 40}, 900),
    ({"a": 50, "b": 25, "c": 25}, 400),
    ({"a": 80, "b": 20}, 400),
]
PLANS = (PLANS * 2)[:RELOADS]
CHAT: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}


def config(urls: dict[str, str], weights: dict[str, float], ttft_ms: int, **kw: Any) -> GatewayConfig:
    ups = tuple(parse_upstream(f"{name}={urls[name]},weight={w}") for name, w in weights.items())
    return GatewayConfig(upstreams=ups, port=0, admin_keys=frozenset({KEY}), slo=Slo(ttft_ms=ttft_ms), **kw)


async def _stream(s: aiohttp.ClientSession, url: str, user: str, rid: str, tokens: int) -> bytes:
    body = {**CHAT, "max_tokens": tokens}
    headers = {"x-user-id": user, "x-request-id": rid}
    async with s.post(url + "/v1/chat/completions", json=body, headers=headers) as r:
        assert r.status == 200, await r.text()
        return await r.read()


def test_sixteen_streams_through_twenty_live_changes() -> None:
    records: list[RequestRecord] = []
    answers: list[bytes] = []
    sent = Counter[str]()

    async def main() -> None:
        servers = {n: ScriptedServer(Script(ttft_s=0.002, itl_s=0.004)) for n in "abc"}
        for server in servers.values():
            await server.start()
        urls = {n: s.url for n, s in servers.items()}
        want = [config(urls, {"a": 95, "b": 5}, 500)]
        gw = RunningGateway(want[0], on_record=records.append, load=lambda: want[0])
        done = asyncio.Event()
        try:
            async with gw, aiohttp.ClientSession() as s:

                async def user_stream(i: int) -> None:  # one sticky user, request after request
                    n = 0
                    while not done.is_set():
                        sent["stream"] += 1
                        answers.append(await _stream(s, gw.url, f"streamer-{i}", f"s-{i}-{n}", 40))
                        n += 1

                streams = [asyncio.create_task(user_stream(i)) for i in range(STREAMS)]
                await asyncio.sleep(0.05)  # every stream has a request in flight
                for epoch, (weights, ttft_ms) in enumerate(PLANS, start=1):
                    want[0] = config(urls, weights, ttft_ms)
                    async with s.post(gw.admin_url + "/tokenpace/config", headers=AUTH) as r:
                        answer = await r.json()
                        assert r.status == 200 and answer["applied"] and answer["epoch"] == epoch, answer
                    async with s.get(gw.admin_url + "/tokenpace/config", headers=AUTH) as r:
                        now = await r.json()  # the new config is the one in effect
                    assert now["epoch"] == epoch
                    assert {u["arm"]: u["weight"] for u in now["split"]} == weights
                    assert now["slo"]["ttft_ms"] == ttft_ms
                    burst = [
                        _stream(s, gw.url, f"user-{epoch}-{j}", f"burst-{epoch}-{j}", 2) for j in range(BURST)
                    ]
                    sent["burst"] += BURST
                    answers.extend(await asyncio.gather(*burst))
                    mine = [
                        r
                        for r in records
                        if r.labels.get("client_request_id", "").startswith(f"burst-{epoch}-")
                    ]
                    assert len(mine) == BURST and {r.labels["config_epoch"] for r in mine} == {str(epoch)}
                    counts = Counter(r.labels["arm"] for r in mine)
                    assert set(counts) <= {a for a, w in weights.items() if w > 0}, counts
                    srm = srm_check(counts, weights, "users")
                    assert srm is None or not srm.flagged, (epoch, counts, weights)
                done.set()
                await asyncio.gather(*streams)
        finally:
            for server in servers.values():
                await server.stop()

    asyncio.run(main())
    assert sum(sent.values()) == len(answers) == len(records)  # no request lost
    assert all(a.rstrip().endswith(b"data: [DONE]") for a in answers)  # no stream cut
    assert Counter(r.labels["outcome"] for r in records) == {"ok": len(records)}
    streamed = [r for r in records if r.labels.get("client_request_id", "").startswith("s-")]
    assert len(streamed) == sent["stream"] >= STREAMS * 2  # streams ran across the changes
    assert len({r.labels["config_epoch"] for r in streamed}) > RELOADS // 2


def test_an_invalid_change_changes_nothing_and_says_why() -> None:
    async def main() -> None:
        async with ScriptedServer(Script(ttft_s=0.001, itl_s=0.001)) as up:
            urls = {"a": up.url, "b": up.url}
            start = config(urls, {"a": 90, "b": 10}, 500)
            problems: list[Any] = []

            def load() -> GatewayConfig:
                if isinstance(problems[0], Exception):
                    raise problems[0]
                result: GatewayConfig = problems[0]
                return result

            said: list[str] = []
            async with RunningGateway(start, load=load, say=said.append) as gw, aiohttp.ClientSession() as s:

                async def post(body: Any = None) -> tuple[int, dict[str, Any]]:
                    async with s.post(gw.admin_url + "/tokenpace/config", json=body, headers=AUTH) as r:
                        return r.status, await r.json()

                for bad, reason in (
                    (ValueError("b=...: not an http(s) URL"), "not an http(s) URL"),
                    (lambda: config(urls, {"a": 0, "b": 0}, 500), "every upstream's weight is 0"),
                    (ValueError("gateway.toml: unknown key 'colour'"), "unknown key 'colour'"),
                    (lambda: config(urls, {"a": 50, "b": 50}, 500, workers=2), "workers cannot change"),
                ):
                    try:
                        problems[:] = [bad() if callable(bad) else bad]
                    except ValueError as exc:  # GatewayConfig's own check: what a load raises
                        problems[:] = [exc]
                    status, answer = await post()
                    assert status == 422 and not answer["applied"] and answer["epoch"] == 0, answer
                    assert any(reason in e for e in answer["errors"]), answer
                    assert reason in said[-1] and "refused" in said[-1]
                for weights, reason in (({"zz": 1}, "no arm 'zz'"), ({"a": 0, "b": 0}, "weight is 0")):
                    status, answer = await post({"weights": weights})
                    assert status == 422 and any(reason in e for e in answer["errors"]), answer
                async with s.get(gw.admin_url + "/tokenpace/config", headers=AUTH) as r:
                    now = await r.json()
                assert now["epoch"] == 0 and {u["arm"]: u["weight"] for u in now["split"]} == {
                    "a": 90,
                    "b": 10,
                }
                async with s.post(gw.admin_url + "/tokenpace/config") as r:  # no key
                    assert r.status == 401
                status, answer = await post({"weights": {"b": 50, "a": 50}, "by": "a test"})
                assert (
                    status == 200
                    and answer["epoch"] == 1
                    and answer["config"]["weights_set_live"]
                    == {
                        "a": 50,
                        "b": 50,
                    }
                )
                assert "a test" in said[-1]
                async with s.get(gw.admin_url + "/metrics", headers=AUTH) as r:  # series carry the epoch
                    assert 'config_epoch="1"' in await r.text()

    asyncio.run(main())


def test_a_mirror_and_labels_added_and_removed_live() -> None:
    from tokenpace.gateway.experiments.mirror import parse_mirror

    records: list[RequestRecord] = []

    async def main() -> None:
        async with (
            ScriptedServer(Script(ttft_s=0.001, itl_s=0.001)) as live,
            # slow enough that the copies are still streaming when the mirror is removed
            ScriptedServer(Script(ttft_s=0.05, itl_s=0.05)) as shadow,
        ):
            start = config({"a": live.url}, {"a": 1}, 500)
            want = [start]
            gw = RunningGateway(start, on_record=records.append, load=lambda: want[0])
            async with gw, aiohttp.ClientSession() as s:

                async def reload() -> dict[str, Any]:
                    async with s.post(gw.admin_url + "/tokenpace/config", headers=AUTH) as r:
                        assert r.status == 200
                        answer: dict[str, Any] = await r.json()
                        return answer

                async def send(n: int, tag: str) -> None:
                    await asyncio.gather(*(_stream(s, gw.url, f"u{i}", f"{tag}-{i}", 2) for i in range(n)))

                await send(5, "before")
                mirrored = dataclasses.replace(
                    start, mirrors=(parse_mirror(f"cand={shadow.url}"),), static_labels={"zone": "z1"}
                )
                want[0] = mirrored
                assert sorted((await reload())["changed"]) == ["label", "mirror"]
                await send(5, "mirrored")
                for _ in range(200):  # copies are sent in the background, never waited for
                    if shadow.stats.requests >= 5:
                        break
                    await asyncio.sleep(0.02)
                assert shadow.stats.requests == 5
                want[0] = start
                await reload()  # the copies still streaming finish and are recorded
                for _ in range(250):
                    if sum(1 for r in records if r.labels.get("shadow")) >= 5:
                        break
                    await asyncio.sleep(0.02)
                await send(5, "after")
                await asyncio.sleep(0.1)
                assert shadow.stats.requests == 5  # the mirror is gone: no more copies

    asyncio.run(main())
    live = [r for r in records if r.labels.get("client_request_id")]  # shadow copies carry none
    zones = {r.labels["client_request_id"].split("-")[0]: r.labels.get("zone") for r in live}
    assert zones == {"before": None, "mirrored": "z1", "after": None}
    shadows = [r for r in records if not r.labels.get("client_request_id")]
    assert len(shadows) == 5 and {r.labels.get("zone") for r in shadows} == {"z1"}
