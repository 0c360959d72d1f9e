"""Bounds on what the gateway keeps and owes (issue 28 items 7, 8, 10): label slots, the events'
own queue and rate, and a shutdown that ends in bounded time whatever the records' writer does."""

from __future__ import annotations

import asyncio
import os
import re
import socket
import threading
import time

import aiohttp
import orjson
import pytest

from gateway.bounds_harness import ADMIN_KEY, assert_healthy_beside, beside, run_bounds
from gateway.hostile_upstream import HostileUpstream
from gateway.request_path.test_gateway_hostile import stream, wait_records
from tokenpace.core.events import OutcomeEvent
from tokenpace.core.record import RequestRecord
from tokenpace.gateway.config.config import GatewayConfig, parse_upstream
from tokenpace.gateway.experiments.events import MAX_EVENT_LABELS
from tokenpace.gateway.lifecycle.serve import RunningGateway
from tokenpace.gateway.observability.prom import ModelLabels
from tokenpace.gateway.recording.sink import RecordSink
from tokenpace.gateway.request_path.model_list import model_ids

LIVENESS_S = 10.0  # "it ended", not a timing measurement


def counter(text: str, name: str, label: str) -> float:
    m = re.search(rf"^{name}{{{label}}} (\S+)$", text, re.M)
    assert m, (name, label)
    return float(m.group(1))


async def post_events(s: aiohttp.ClientSession, url: str, events: list[dict]) -> int:
    headers = {"Authorization": f"Bearer {ADMIN_KEY}"}
    async with s.post(url + "/tokenpace/events", data=orjson.dumps(events), headers=headers) as r:
        await r.read()
        return r.status


@pytest.mark.timing
def test_an_event_flood_is_rate_limited_per_client_and_never_evicts_a_record(tmp_path) -> None:
    async def flood(s: aiohttp.ClientSession, url: str) -> list[int]:
        # scaled down and paced (the flooding client shares this process's one core with the gateway)
        batch = [{"user_id": "u", "event": f"spam-{i}"} for i in range(100)]
        statuses = []
        for _ in range(30):
            statuses.append(await post_events(s, url, batch))
            await asyncio.sleep(0.01)
        return statuses

    async def body(gw: RunningGateway, s: aiohttp.ClientSession, records: list[RequestRecord], direct: float):
        statuses, healthy = await beside(s, gw.url, gw.admin_url, flood(s, gw.admin_url))
        assert_healthy_beside(healthy, direct)
        assert statuses[:5] == [200] * 5 and 429 in statuses  # the burst, then the rate
        await wait_records(records, len(healthy.ttft_s))
        async with s.get(gw.admin_url + "/metrics", headers={"Authorization": f"Bearer {ADMIN_KEY}"}) as r:
            text = await r.text()
        dropped = counter(text, "tokenpace_gateway_outcome_events_dropped_total", 'reason="rate_limited"')
        assert dropped == 100 * statuses.count(429)
        assert "tokenpace_gateway_records_dropped_total 0.0" in text
        # random names took the overflow slots; the guard-rails' own name keeps its label
        names = set(re.findall(r'outcome_events_total\{arm="[^"]*",event="([^"]+)"\}', text))
        assert len(names - {"other"}) <= MAX_EVENT_LABELS
        await asyncio.sleep(0.3)  # the bucket refills at its rate
        assert await post_events(s, gw.admin_url, [{"user_id": "u2", "event": "complaint"}]) == 200
        async with s.get(gw.admin_url + "/metrics", headers={"Authorization": f"Bearer {ADMIN_KEY}"}) as r:
            assert 'event="complaint"' in await r.text()

    run_bounds(
        tmp_path, body, admin_keys=frozenset({ADMIN_KEY}), events_per_client_s=50.0, events_burst=500.0
    )


def test_events_wait_in_their_own_queue_behind_the_records() -> None:
    gate = threading.Event()

    def slow_writer(batch: list) -> None:
        gate.wait(LIVENESS_S)

    async def main() -> RecordSink:
        sink = RecordSink(slow_writer, maxsize=3, events_maxsize=2, linger_s=0)
        sink.start()
        sink.put(RequestRecord("held"))  # taken by the writer, which then blocks
        await asyncio.sleep(0.05)
        for i in range(10):
            sink.put(OutcomeEvent("spam", "a", 0.0, str(i), None, None, None))
        for i in range(3):
            sink.put(RequestRecord(f"r{i}"))
        gate.set()
        await sink.close(LIVENESS_S)
        return sink

    sink = asyncio.run(main())
    assert sink.dropped == 0 and sink.written == 4  # every record, however many events came
    assert sink.events_dropped == 8 and sink.events_written == 2


def test_shutdown_ends_in_bounded_time_with_a_hung_writer_and_says_what_it_dropped() -> None:
    hang = threading.Event()  # never set: the writer hangs as in open() on a dead network disk

    def hung_writer(batch: list) -> None:
        hang.wait(3600)

    async def main() -> tuple[RecordSink, float]:
        sink = RecordSink(hung_writer)
        sink.start()
        for i in range(5):
            sink.put(RequestRecord(f"r{i}"))
        await asyncio.sleep(0.05)
        t0 = time.monotonic()
        await sink.close(0.2)
        return sink, time.monotonic() - t0

    sink, took = asyncio.run(asyncio.wait_for(main(), LIVENESS_S))
    assert took < LIVENESS_S and sink.dropped == 5 and sink.written == 0


def test_records_path_replaced_by_a_fifo_does_not_block_the_writer(tmp_path) -> None:
    path = tmp_path / "records.jsonl"

    async def main() -> RunningGateway:
        async with HostileUpstream() as up:
            config = GatewayConfig(
                upstreams=(parse_upstream(f"up={up.url}"),),
                port=0,
                records_path=str(path),
                shutdown_timeout_s=2,
            )
            gw = RunningGateway(config)
            async with gw, aiohttp.ClientSession() as s:
                os.mkfifo(path.with_suffix(".fifo"))
                os.replace(path.with_suffix(".fifo"), path)  # no reader: a blocking open() would hang
                _, broke = await stream(s, gw.url, "healthy")
                assert not broke
            return gw

    gw = asyncio.run(asyncio.wait_for(main(), LIVENESS_S * 2))
    assert gw.gateway.sink.dropped == 1 and gw.gateway.sink.write_errors == 1


def test_configured_and_listed_models_keep_their_label_whatever_clients_send() -> None:
    labels = ModelLabels({"declared"}, limit=2)
    labels.reserve(model_ids({"data": [{"id": "listed"}, {"id": 5}, {"nope": 1}, {"id": "x" * 500}]}))
    assert [labels(f"random-{i}") for i in range(4)] == ["random-0", "random-1", "other", "other"]
    assert labels("declared") == "declared" and labels("listed") == "listed"
    assert labels(None) == "unknown" and labels("random-0") == "random-0"


def test_the_gateway_reserves_the_models_its_upstream_lists(tmp_path) -> None:
    from tokenpace.testing.scripted_server import Script, ScriptedServer

    async def main() -> list[str]:
        async with ScriptedServer(Script(ttft_s=0.001, itl_s=0.001)) as up:
            config = GatewayConfig(upstreams=(parse_upstream(f"up={up.url}"),), port=0, max_model_labels=1)
            async with RunningGateway(config) as gw, aiohttp.ClientSession() as s:
                assert gw.gateway.models_listed is None  # not asked while slots are free
                chat = {"model": "random-1", "messages": [{"role": "user", "content": "hi"}]}
                async with s.post(gw.url + "/v1/chat/completions", json=chat) as r:
                    await r.read()
                assert gw.gateway.models_listed is not None
                await asyncio.wait_for(gw.gateway.models_listed, LIVENESS_S)
                return sorted(gw.gateway.models.reserved)

    reserved = asyncio.run(main())
    assert reserved, "the scripted server lists its model"


@pytest.mark.timing
def test_a_client_that_never_reads_is_blamed_and_cut_not_the_upstream(tmp_path) -> None:
    async def never_reads(port: int) -> None:
        body = b'{"model":"big","messages":[{"role":"user","content":"hi"}],"stream":true}'
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # the kernel holds little for it
        sock.setblocking(False)
        await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
        _, writer = await asyncio.open_connection(sock=sock)
        head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n"
        writer.write(head + b"Content-Length: %d\r\n\r\n%b" % (len(body), body))
        await writer.drain()
        transport = writer.transport
        transport.pause_reading()  # type: ignore[attr-defined]  # reads nothing: the gateway's buffer towards it fills
        await asyncio.sleep(2.5)  # past the stall timeout (1 s here)
        writer.close()

    async def body(gw: RunningGateway, s: aiohttp.ClientSession, records: list[RequestRecord], direct: float):
        _, healthy = await beside(s, gw.url, gw.admin_url, never_reads(gw.port))
        assert_healthy_beside(healthy, direct)
        await wait_records(records, 1 + len(healthy.ttft_s))

    records = run_bounds(tmp_path, body, stall_timeout_s=1.0)
    slow = next(r for r in records if r.labels["model"] == "big")
    assert slow.labels["outcome"] == "client_slow", (slow.labels, slow.error)
    assert slow.error == "client read nothing for 1 s"
    assert slow.status.value == "cancelled"  # the client's doing: no failure of the upstream


def test_bodies_held_to_measure_them_share_one_budget() -> None:
    from tokenpace.gateway.metering.budget import Budget
    from tokenpace.gateway.metering.meter import Meter
    from tokenpace.wire.dialects.openai_chat import OpenAIChat

    budget = Budget(limit=1000)
    first, second = RequestRecord("a"), RequestRecord("b")
    kept = Meter(first, OpenAIChat(), "application/json", "")
    over = Meter(second, OpenAIChat(), "application/json", "")
    kept.budget = over.budget = budget
    kept.feed(b"x" * 800, 1)
    over.feed(b"y" * 300, 1)  # past the budget: forwarded, not kept
    assert budget.held == 800 and over.protocol_error == "body past the gateway's memory budget: not measured"
    assert not budget.exhausted  # 800 of 1000: new non-streamed work still taken
    kept.release()
    over.release()
    assert budget.held == 0


def test_non_streamed_work_is_refused_early_while_the_budget_is_spent() -> None:
    from tokenpace.testing.scripted_server import Script, ScriptedServer

    async def main() -> tuple[int, int, str]:
        async with ScriptedServer(Script(ttft_s=0.001, itl_s=0.001)) as up:
            config = GatewayConfig(upstreams=(parse_upstream(f"up={up.url}"),), port=0)
            async with RunningGateway(config) as gw, aiohttp.ClientSession() as s:
                gw.gateway.budget.held = gw.gateway.budget.limit  # as if many slow readers held it
                chat = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
                url = gw.url + "/v1/chat/completions"
                async with s.post(url, json=chat) as r:
                    whole = r.status
                    assert r.headers["Retry-After"] == "1"
                async with s.post(url, json={**chat, "stream": True}) as r:
                    await r.read()
                    streamed = r.status
                async with s.get(gw.url + "/metrics") as r:
                    return whole, streamed, await r.text()

    whole, streamed, text = asyncio.run(asyncio.wait_for(main(), 30))
    assert whole == 503 and streamed == 200  # streams hold at most a relay's buffer each
    assert counter(text, "tokenpace_gateway_rejected_requests_total", 'reason="memory_budget"') == 1.0
