"""Shadow traffic (``--mirror``): copies measured and recorded as a shadow arm, request for request;
the live path never waits for a slow or dead candidate; a copy is never sent twice."""

from __future__ import annotations

import asyncio

import aiohttp
import numpy as np
import pytest

from tokenpace.core.analysis.comparison.paired import paired_compare
from tokenpace.core.metrics import ttft_ns
from tokenpace.core.record import RequestRecord, Status
from tokenpace.gateway.config.config import GatewayConfig, parse_upstream
from tokenpace.gateway.experiments.mirror import SHADOW_HEADER, mirrored, parse_mirror
from tokenpace.gateway.lifecycle.serve import RunningGateway
from tokenpace.testing.scripted_server import Script, ScriptedServer

CHAT = {"model": "m", "messages": [{"role": "user", "content": "hello"}], "max_tokens": 6, "stream": True}
LIVE = Script(ttft_s=0.02, itl_s=0.004)


async def _traffic(
    live_url: str, mirror: str | None, n: int, users: int | None = None, **cfg: object
) -> tuple[list[RequestRecord], list[RequestRecord], str]:
    records: list[RequestRecord] = []
    config = GatewayConfig(
        upstreams=(parse_upstream(f"live={live_url}"),),
        port=0,
        mirrors=(parse_mirror(mirror),) if mirror else (),
        **cfg,  # type: ignore[arg-type]
    )
    async with RunningGateway(config, on_record=records.append) as gw, aiohttp.ClientSession() as s:
        for i in range(n):
            headers = {"x-user-id": f"user-{i % users}"} if users else {}
            async with s.post(gw.url + "/v1/chat/completions", json=CHAT, headers=headers) as r:
                assert r.status == 200
                await r.read()
        await asyncio.sleep(0.3)  # let the shadow copies finish
        metrics = await (await s.get(gw.url + "/metrics")).text()
    live = [r for r in records if r.labels.get("shadow") != "true"]
    shadow = [r for r in records if r.labels.get("shadow") == "true"]
    return live, shadow, metrics


def test_every_live_request_gets_a_measured_shadow_copy_and_the_slower_candidate_shows():
    async def main() -> None:
        async with ScriptedServer(LIVE) as up, ScriptedServer(Script(ttft_s=0.1, itl_s=0.02)) as cand:
            live, shadow, metrics = await _traffic(up.url, f"cand={cand.url},version=v2", 12)
            seen = list(cand.stats.headers)
        assert len(live) == len(shadow) == 12
        assert {r.labels["mirror_of"] for r in shadow} == {r.request_id for r in live}
        assert all(r.status is Status.OK and r.output_tokens == 6 for r in shadow)
        assert all(h.get(SHADOW_HEADER) == b"1" for h in seen)
        assert all(r.labels["arm"] == "cand" and r.labels["version"] == "v2" for r in shadow)
        assert 'tokenpace_gateway_shadow_requests_total{outcome="ok",shadow="cand"} 12.0' in metrics
        # live series never count the copies
        assert 'upstream="cand"' not in metrics.split("tokenpace_gateway_shadow", 1)[0]
        paired = paired_compare(live, shadow, 0.05)
        ttft = next(m for m in paired.metrics if m.metric == "ttft")
        assert paired.pairs == 12 and ttft.verdict == "slower", ttft

    asyncio.run(asyncio.wait_for(main(), 60))


@pytest.mark.timing
def test_a_hanging_candidate_never_delays_live_traffic_its_copies_are_dropped_and_counted():
    async def main() -> tuple[list[float], list[float], list[RequestRecord], str]:
        async with ScriptedServer(LIVE) as up, ScriptedServer(Script(ttft_s=30)) as hang:
            base, _, _ = await _traffic(up.url, None, 20)
            live, shadow, metrics = await _traffic(
                up.url, f"hang={hang.url}", 20, mirror_queue=2, mirror_concurrency=1
            )
        ms = [[ttft_ns(r) / 1e6 for r in rs] for rs in (base, live)]  # type: ignore[operator]
        return ms[0], ms[1], shadow, metrics

    base, live, shadow, metrics = asyncio.run(asyncio.wait_for(main(), 60))
    assert len(live) == 20
    assert np.median(live) < 2 * np.median(base) + 10, (np.median(base), np.median(live))
    dropped = float(
        metrics.split('tokenpace_gateway_shadow_dropped_total{reason="queue_full",shadow="hang"} ')[
            1
        ].split()[0]
    )
    assert dropped >= 20 - 3  # one in flight, two queued: the rest dropped at once
    # at the gateway's close the copies still waiting are dropped and counted, never awaited
    assert len(shadow) <= 1


def test_a_copy_is_sent_once_even_when_the_candidate_drops_it():
    async def main() -> None:
        async with ScriptedServer(LIVE) as up, ScriptedServer(Script(close_before_headers=True)) as cand:
            live, shadow, _ = await _traffic(up.url, f"cand={cand.url}", 6)
            assert cand.stats.requests == 6  # one send per copy: no retry on a fresh connection
        assert all(r.status is Status.OK for r in live)
        assert [r.status for r in shadow] == [Status.CONNECT_ERROR] * 6

    asyncio.run(asyncio.wait_for(main(), 60))


def test_a_share_of_users_is_mirrored_whole_sessions_at_a_time():
    async def main() -> None:
        async with ScriptedServer(LIVE) as up, ScriptedServer(LIVE) as cand:
            live, shadow, _ = await _traffic(up.url, f"cand={cand.url},share=0.5", 40, users=20)
        users_of = {r.request_id: r.labels.get("user") for r in live}
        shadowed = [users_of[r.labels["mirror_of"]] for r in shadow]
        mirrored_users = set(shadowed)
        assert 3 <= len(mirrored_users) <= 17  # about half of 20
        assert all(shadowed.count(u) == 2 for u in mirrored_users)  # both requests of each, or none

    asyncio.run(asyncio.wait_for(main(), 60))


def test_mirror_options_are_checked():
    assert parse_mirror("c=http://127.0.0.1:1/v1,share=0.25").share == 0.25
    for bad in ("c=http://127.0.0.1:1/v1,share=0", "c=http://127.0.0.1:1/v1,share=x", "c=ftp://x"):
        with pytest.raises(ValueError):
            parse_mirror(bad)
    with pytest.raises(ValueError, match="unique"):
        GatewayConfig(
            upstreams=(parse_upstream("a=http://127.0.0.1:1/v1"),),
            mirrors=(parse_mirror("a=http://127.0.0.1:2/v1"),),
        )
    assert mirrored(b"anyone", 1.0) and mirrored(b"u1", 0.5) == mirrored(b"u1", 0.5)


def test_a_bug_of_ours_in_a_shadow_copy_is_recorded_and_its_worker_lives_on(monkeypatch):
    from tokenpace.gateway.experiments import mirror

    calls = []
    read = mirror.Mirrors._read

    async def first_fails(*args, **kw):
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("injected fault")
        return await read(*args, **kw)

    monkeypatch.setattr(mirror.Mirrors, "_read", staticmethod(first_fails))

    async def main() -> None:
        async with ScriptedServer(LIVE) as up, ScriptedServer(LIVE) as cand:
            live, shadow, _ = await _traffic(up.url, f"cand={cand.url}", 3, mirror_concurrency=1)
        assert len(live) == 3 and all(r.status is Status.OK for r in live)
        assert len(shadow) == 3  # the one worker survived the first copy's fault
        first = next(r for r in shadow if r.labels["outcome"] == "internal_error")
        assert first.error == "internal error (RuntimeError)"
        assert sum(r.status is Status.OK for r in shadow) == 2

    asyncio.run(asyncio.wait_for(main(), 60))


@pytest.mark.parametrize(
    ("candidate", "models"),
    [("hostile", ["endless", "drip0", "huge", "reset", "endless-head"]), ("wire", ["bomb-sse", "bomb-json"])],
)
def test_a_hostile_candidate_gets_its_copies_and_each_has_one_record_with_a_reason(
    candidate: str, models: list[str]
) -> None:
    """Issue 38, edge: a shadow candidate's hostile answers (endless and dripping events, a 2 MiB
    event, a reset, endless headers, gzip bombs) each end in one shadow record with its reason;
    the live requests beside them are all ok."""
    from gateway.hostile_upstream import HostileUpstream
    from tokenpace.testing.wire_upstream import WireUpstream, answer

    async def main() -> tuple[list[RequestRecord], list[RequestRecord]]:
        records: list[RequestRecord] = []
        if candidate == "wire":  # the bombs built (cached) first: the copies meet them, not a wait
            for model in models:
                await asyncio.to_thread(answer, model)
        cand_cm = HostileUpstream() if candidate == "hostile" else WireUpstream()
        async with ScriptedServer(LIVE) as up, cand_cm as cand:
            config = GatewayConfig(
                upstreams=(parse_upstream(f"live={up.url}"),),
                port=0,
                mirrors=(parse_mirror(f"cand={cand.url}"),),
                first_token_timeout_s=2.0,
                stall_timeout_s=1.0,
            )
            async with RunningGateway(config, on_record=records.append) as gw, aiohttp.ClientSession() as s:
                for model in models:
                    async with s.post(gw.url + "/v1/chat/completions", json={**CHAT, "model": model}) as r:
                        assert r.status == 200
                        try:
                            await r.read()
                        except aiohttp.ClientPayloadError:  # the live record says who cut it
                            await asyncio.sleep(0.2)
                            seen = [(x.labels.get("shadow"), x.status, x.error) for x in records]
                            raise AssertionError(f"live stream cut ({model}): {seen}") from None
                for _ in range(200):  # until every copy has its record (each is bounded in time)
                    if sum(1 for r in records if r.labels.get("shadow") == "true") >= len(models):
                        break
                    await asyncio.sleep(0.05)
        live = [r for r in records if r.labels.get("shadow") != "true"]
        return live, [r for r in records if r.labels.get("shadow") == "true"]

    live, shadow = asyncio.run(asyncio.wait_for(main(), 60))
    assert len(live) == len(models) and all(r.status is Status.OK for r in live)
    assert sorted(r.labels["mirror_of"] for r in shadow) == sorted(r.request_id for r in live)  # one each
    for r in shadow:
        assert r.status is not Status.OK and r.error, (r.labels["model"], r.status, r.error)
        assert r.labels["outcome"] != "internal_error"


def test_a_shadow_copys_bomb_is_inflated_a_slice_per_call_and_ends_at_the_cap(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A candidate's gzip bomb is inflated on the loop at most TURN_BYTES (+ one step) per call,
    the rest on later turns, so live streams run between; the copy ends at the inflation cap."""
    from gateway.inflate_probe import largest_slice
    from tokenpace.testing.wire_upstream import WireUpstream, answer
    from tokenpace.wire import inflate

    largest = largest_slice(monkeypatch)
    models = ["bomb-sse", "bomb-json"]

    async def main() -> list[RequestRecord]:
        for model in models:
            await asyncio.to_thread(answer, model)  # built (cached) off the loop first
        async with ScriptedServer(LIVE) as up, WireUpstream() as cand:
            live, shadow = await _one_live_request_each(up.url, f"cand={cand.url}", models)
        assert len(live) == len(models) and all(r.status is Status.OK for r in live)
        return shadow

    shadow = asyncio.run(asyncio.wait_for(main(), 120))
    errors = {r.labels["model"]: r.error for r in shadow}
    assert errors == {
        "bomb-sse": "compressed body inflates past 64 MiB",
        "bomb-json": "compressed body inflates past 8 MiB",
    }
    assert 0 < largest[0] <= inflate.TURN_BYTES + inflate.STEP_BYTES


async def _one_live_request_each(
    live_url: str, mirror: str, models: list[str]
) -> tuple[list[RequestRecord], list[RequestRecord]]:
    """One live request per model, then until every copy has its record."""
    records: list[RequestRecord] = []
    config = GatewayConfig(
        upstreams=(parse_upstream(f"live={live_url}"),), port=0, mirrors=(parse_mirror(mirror),)
    )
    async with RunningGateway(config, on_record=records.append) as gw, aiohttp.ClientSession() as s:
        for model in models:
            async with s.post(gw.url + "/v1/chat/completions", json={**CHAT, "model": model}) as r:
                assert r.status == 200
                await r.read()
        while sum(1 for r in records if r.labels.get("shadow") == "true") < len(models):
            await asyncio.sleep(0.05)
    live = [r for r in records if r.labels.get("shadow") != "true"]
    return live, [r for r in records if r.labels.get("shadow") == "true"]
