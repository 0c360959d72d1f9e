"""POST /tokenpace/events: outcomes joined to the request's arm, counted, stored beside the records."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
import orjson

from tokenpace.adapters.store import connect
from tokenpace.core.events import UNKNOWN_ARM
from tokenpace.gateway.config.config import GatewayConfig, parse_upstream
from tokenpace.gateway.experiments.events import RecentRequests
from tokenpace.gateway.lifecycle.serve import RunningGateway
from tokenpace.gateway.recording.store_writer import StoreRecordWriter
from tokenpace.testing.scripted_server import Script, ScriptedServer

CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3, "stream": True}


async def _chat(s: aiohttp.ClientSession, url: str, user: str, rid: str | None = None) -> str:
    headers = {"x-user-id": user, **({"x-request-id": rid} if rid else {})}
    async with s.post(url + "/v1/chat/completions", json=CHAT, headers=headers) as r:
        assert r.status == 200
        await r.read()
        return r.headers["x-request-id"]


def test_events_join_the_arm_are_counted_and_stored(tmp_path: Path) -> None:
    store = connect(str(tmp_path / "runs.db"))

    async def main() -> tuple[dict, str]:
        async with (
            ScriptedServer(Script(ttft_s=0.002, itl_s=0.001)) as up_a,
            ScriptedServer(Script(ttft_s=0.002, itl_s=0.001)) as up_b,
        ):
            config = GatewayConfig(
                upstreams=(parse_upstream(f"a={up_a.url}"), parse_upstream(f"b={up_b.url},weight=1")),
                port=0,
            )
            gw = RunningGateway(config, writer=StoreRecordWriter(store, config, "s1"))
            async with gw, aiohttp.ClientSession() as s:
                ids = {u: await _chat(s, gw.url, u) for u in (f"user-{i}" for i in range(20))}
                mine = await _chat(s, gw.url, "user-x", rid="app-req-1")  # the client's own id
                assert mine != "app-req-1"  # is kept apart: events join on the gateway's
                events: list[dict[str, object]] = [
                    {"request_id": rid, "event": "accepted"} for rid in ids.values()
                ]
                events += [
                    {"user_id": "user-3", "event": "complaint", "value": 2},
                    {"request_id": "never-seen", "event": "accepted"},
                ]
                async with s.post(gw.admin_url + "/tokenpace/events", data=orjson.dumps(events)) as r:
                    assert r.status == 200
                    answer = await r.json()
                async with s.get(gw.admin_url + "/metrics") as r:
                    metrics = await r.text()
                arm_of = {rec: gw.gateway.recent.get(rid) for rec, rid in ids.items()}
            return {"answer": answer, "arm_of": arm_of}, metrics

    out, metrics = asyncio.run(main())
    assert out["answer"] == {"accepted": 22, "unknown_request_ids": 1}
    stored = store.load_events(0.0)
    assert len(stored) == 22 and {e.session for e in stored} == {"s1"}
    by_request = {e.request_id: e for e in stored if e.request_id}
    assert by_request["never-seen"].arm == UNKNOWN_ARM  # counted and kept, not lost
    for known in out["arm_of"].values():
        assert known is not None
        rid_events = [e for e in stored if e.user == known[2] and e.event == "accepted"]
        assert rid_events and all(e.arm == known[0] for e in rid_events)
    complaint = next(e for e in stored if e.event == "complaint")
    assert complaint.arm == out["arm_of"]["user-3"][0] and complaint.value == 2.0
    assert complaint.user == out["arm_of"]["user-3"][2] and "user-3" not in (complaint.user or "")
    arms = {v[0] for v in out["arm_of"].values()}
    assert arms == {"a", "b"}
    for arm in arms:
        n = sum(1 for v in out["arm_of"].values() if v[0] == arm)
        assert f'tokenpace_gateway_outcome_events_total{{arm="{arm}",event="accepted"}} {float(n)}' in metrics
    assert 'tokenpace_gateway_outcome_events_total{arm="unknown",event="accepted"} 1.0' in metrics
    records = [r for run in store.list_runs(where={"source": "gateway"}) for r in store.load_records(run.id)]
    assert {r.labels["user"] for r in records} >= {v[2] for v in out["arm_of"].values()}
    assert all("user-" not in r.labels["user"] for r in records)
    store.close()


def test_bad_events_are_400_with_a_reason_that_never_echoes_the_value() -> None:
    async def main() -> list[tuple[int, str]]:
        async with ScriptedServer(Script()) as up:
            config = GatewayConfig(upstreams=(parse_upstream(f"a={up.url}"),), port=0)
            async with RunningGateway(config) as gw, aiohttp.ClientSession() as s:
                out = []
                bodies = [
                    b"{not json",
                    b"[]",
                    orjson.dumps({"event": "ok"}),
                    orjson.dumps({"request_id": "r", "event": "SECRET value!"}),
                    orjson.dumps({"request_id": "r", "event": "x", "value": "SECRET"}),
                    orjson.dumps({"request_id": "SECRET\nx", "event": "x"}),
                    orjson.dumps({"request_id": "r", "event": "x", "SECRET": 1}),
                    orjson.dumps([{"request_id": "r", "event": "x"}] * 1001),
                    b"[" + b"1," * 200_000 + b"1]",
                ]
                for body in bodies:
                    async with s.post(gw.url + "/tokenpace/events", data=body) as r:
                        out.append((r.status, (await r.json())["error"]["message"]))

                async def pieces():  # chunked, no Content-Length: bounded as it arrives
                    for _ in range(100):
                        yield b" " * 4096

                async with s.post(gw.url + "/tokenpace/events", data=pieces()) as r:
                    out.append((r.status, (await r.json())["error"]["message"]))
                small = [{"request_id": "r", "event": "accepted"}] * 300  # several chunks, in bounds

                async def slices():
                    data = orjson.dumps(small)
                    for i in range(0, len(data), 1000):
                        yield data[i : i + 1000]

                async with s.post(gw.url + "/tokenpace/events", data=slices()) as r:
                    assert r.status == 200 and (await r.json())["accepted"] == 300
                return out

    answers = asyncio.run(main())
    assert [status for status, _ in answers] == [400] * 8 + [413, 413]
    for _, message in answers:
        assert "SECRET" not in message and len(message) < 120
    assert "request_id" in answers[2][1] and "value" in answers[4][1] and "control" in answers[5][1]


def test_events_need_the_admin_key_when_one_is_set() -> None:
    async def main() -> tuple[int, int]:
        async with ScriptedServer(Script()) as up:
            config = GatewayConfig(
                upstreams=(parse_upstream(f"a={up.url}"),),
                port=0,
                admin_port=0,
                admin_keys=frozenset({"adm"}),
            )
            async with RunningGateway(config) as gw, aiohttp.ClientSession() as s:
                body = orjson.dumps({"user_id": "u", "event": "accepted"})
                async with s.post(gw.admin_url + "/tokenpace/events", data=body) as r:
                    without = r.status
                headers = {"Authorization": "Bearer adm"}
                async with s.post(gw.admin_url + "/tokenpace/events", data=body, headers=headers) as r:
                    with_key = r.status
                async with s.post(gw.url + "/tokenpace/events", data=body, headers=headers) as r:
                    assert r.status == 404  # not on the proxy port when the admin pages are apart
                return without, with_key

    assert asyncio.run(main()) == (401, 200)


def test_recent_requests_is_bounded() -> None:
    recent = RecentRequests(capacity=3)
    for i in range(5):
        recent.add(f"r{i}", "a", "a", None)
    assert len(recent) == 3 and recent.get("r0") is None and recent.get("r4") == ("a", "a", None)


def test_an_error_answer_carries_the_request_id_too() -> None:
    from tokenpace.testing.procs import free_port

    async def main() -> tuple[int, str | None, str | None]:
        config = GatewayConfig(upstreams=(parse_upstream(f"a=http://127.0.0.1:{free_port()}/v1"),), port=0)
        async with RunningGateway(config) as gw, aiohttp.ClientSession() as s:
            r = await s.post(gw.url + "/v1/chat/completions", json=CHAT)
            await r.read()
            rid = r.headers.get("x-request-id")
            return r.status, rid, (gw.gateway.recent.get(rid) or (None,))[0] if rid else None

    status, rid, arm = asyncio.run(main())
    assert status == 502 and rid and arm == "a"


def test_the_printed_hint_names_the_arms_the_store_holds() -> None:
    from tokenpace.app.serving.gateway_serving import compare_hint

    two = GatewayConfig(
        upstreams=(parse_upstream("a=http://h/v1"), parse_upstream("b=http://g/v1,arm=canary"))
    )
    assert "compare source=gateway,arm=a source=gateway,arm=canary" in compare_hint(two)
    assert "tokenpace arms --since 1h" in compare_hint(two)
    one = GatewayConfig(upstreams=(parse_upstream("a=http://h/v1"),))
    assert compare_hint(one) == "tokenpace runs list --where source=gateway"
