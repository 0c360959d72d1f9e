"""The gateway bounded against hostile peers (issue 28): each hostile request runs beside healthy
traffic (bounds_harness.py), which must stay ok, fast enough, observable and small; the hostile
request itself is recorded with the right outcome."""

from __future__ import annotations

import asyncio
import re

import aiohttp
import pytest

from gateway.bounds_harness import HEALTHY_LANES, assert_healthy_beside, beside, run_bounds
from gateway.hostile_upstream import FLOOD_TOKENS, LIAR_TOKENS
from gateway.request_path.test_gateway_hostile import stream, wait_records
from tokenpace.client import Sender
from tokenpace.core.record import TOKEN_TIMESTAMPS_KEPT, RequestRecord, Status
from tokenpace.gateway.lifecycle.serve import RunningGateway
from tokenpace.gateway.metering import relay as relay_module
from tokenpace.gateway.metering.meter import Meter
from tokenpace.wire.dialects import get_dialect
from tokenpace.wire.dialects.base import Sampling
from tokenpace.wire.endpoint import parse_endpoint


def itl_count(text: str, model: str) -> float:
    pattern = rf'^tokenpace_gateway_inter_token_latency_seconds_count{{[^}}]*model="{model}"[^}}]*}} (\S+)$'
    m = re.search(pattern, text, re.M)
    assert m, model
    return float(m.group(1))


@pytest.mark.timing
def test_a_flood_of_tiny_events_is_metered_in_slices_and_its_timestamps_capped(tmp_path, monkeypatch) -> None:
    largest: list[int] = [0]
    feed = Meter.feed

    def spy(self: Meter, data: bytes, now: int) -> None:
        largest[0] = max(largest[0], len(data))
        feed(self, data, now)

    monkeypatch.setattr(Meter, "feed", spy)

    async def body(gw: RunningGateway, s: aiohttp.ClientSession, records: list[RequestRecord], direct: float):
        (got, broke), healthy = await beside(s, gw.url, gw.admin_url, stream(s, gw.url, "flood"))
        assert not broke and got.endswith(b"data: [DONE]\n\n")
        assert_healthy_beside(healthy, direct)
        await wait_records(records, 1 + len(healthy.ttft_s))
        async with s.get(gw.admin_url + "/metrics") as r:
            text = await r.text()
        assert itl_count(text, "flood") == FLOOD_TOKENS  # every gap counted, the capped ones too
        # 3 tokens, 2 gaps each (the warm-up requests included)
        assert itl_count(text, "healthy") == 2 * (len(healthy.ttft_s) + HEALTHY_LANES)

    records = run_bounds(tmp_path, body)
    flood = next(r for r in records if r.labels["model"] == "flood")
    assert flood.status is Status.OK and flood.output_tokens_counted == FLOOD_TOKENS + 1
    assert len(flood.token_ns) == TOKEN_TIMESTAMPS_KEPT  # the record says it was capped:
    assert flood.token_ns_dropped == FLOOD_TOKENS + 1 - TOKEN_TIMESTAMPS_KEPT
    assert 0 < largest[0] <= relay_module.METER_SLICE  # no read metered in one go
    assert f'"token_ns_dropped":{flood.token_ns_dropped}' in (tmp_path / "records.jsonl").read_text()


def test_bench_client_caps_the_timestamps_of_a_flood_too() -> None:
    from gateway.hostile_upstream import HostileUpstream

    async def main() -> RequestRecord:
        async with HostileUpstream() as up:
            sender = Sender(parse_endpoint(up.url), get_dialect("chat"), "flood", Sampling(), True, 20.0)
            rec = RequestRecord("r")
            await sender.send(rec, sender.prepare("a", 4, "r"))
            await sender.close()
            return rec

    rec = asyncio.run(asyncio.wait_for(main(), 30))
    assert rec.status is Status.OK and rec.output_tokens_counted == FLOOD_TOKENS + 1
    assert len(rec.token_ns) == TOKEN_TIMESTAMPS_KEPT
    assert rec.token_ns_dropped == FLOOD_TOKENS + 1 - TOKEN_TIMESTAMPS_KEPT
    assert LIAR_TOKENS  # (used by the usage tests)


def test_itl_counted_as_tokens_arrive_equals_one_observation_per_gap() -> None:
    from prometheus_client import CollectorRegistry, Histogram

    from tokenpace.core.metrics import itl_gaps_ns
    from tokenpace.gateway.metering.stream_stats import ItlCounts, bounds_ns

    buckets = (0.001, 0.002, 0.005, 0.01)
    registry = CollectorRegistry()
    bulk = Histogram("bulk", "", registry=registry, buckets=buckets)
    one_by_one = Histogram("each", "", registry=registry, buckets=buckets)
    rec, itl = RequestRecord("r"), ItlCounts(bounds_ns(buckets))
    arrivals = [(0, 1), (1_000_000, 2), (3_500_000, 1), (3_500_000 + 2_000_000, 3), (60_000_000, 1)]
    for now, chunks in arrivals:
        for _ in range(chunks):
            rec.note_token_chunk(now, True)
        itl.note(now, chunks)
    itl.add_to(bulk)
    for gap in itl_gaps_ns(rec):
        one_by_one.observe(gap / 1e9)
    samples = {
        m.name: [
            (s.name[len(m.name) :], s.labels.get("le"), s.value) for s in m.samples if "created" not in s.name
        ]
        for m in registry.collect()
    }
    assert samples["bulk"][-2:] == [("_count", None, 7.0), ("_sum", None, 0.06)]
    assert samples["bulk"] == samples["each"]


@pytest.mark.timing
def test_implausible_usage_is_flagged_and_the_counted_tokens_stand(tmp_path) -> None:
    async def body(gw: RunningGateway, s: aiohttp.ClientSession, records: list[RequestRecord], direct: float):
        (got, broke), healthy = await beside(s, gw.url, gw.admin_url, stream(s, gw.url, "liar"))
        assert not broke and got.endswith(b"data: [DONE]\n\n")
        assert_healthy_beside(healthy, direct)
        await wait_records(records, 1 + len(healthy.ttft_s))
        async with s.get(gw.admin_url + "/metrics") as r:
            text = await r.text()
        # the output-token histogram got the 3 counted tokens, not 10^12
        usage = (
            r'^gen_ai_client_token_usage_sum\{[^}]*gen_ai_token_type="output",[^}]*model="liar"[^}]*\} (\S+)$'
        )
        m = re.search(usage, text, re.M)
        assert m and float(m.group(1)) == 3.0, m

    records = run_bounds(tmp_path, body)
    liar = next(r for r in records if r.labels["model"] == "liar")
    assert liar.output_tokens_server == LIAR_TOKENS and liar.usage_implausible
    assert liar.output_tokens == 3 and liar.output_tokens_source.value == "chunks_usage_implausible"
    assert '"output_tokens_source":"chunks_usage_implausible"' in (tmp_path / "records.jsonl").read_text()
