"""Issue 28 cases with eight healthy streams beside them ("Done when" (a)-(e)): label slots taken by
random model names (item 7), the records path replaced by a FIFO until shutdown (item 10), and a
bug of ours in the relay or before the response head (never a 500 without a record)."""

from __future__ import annotations

import asyncio
import logging
import os
import time

import aiohttp
import pytest

from gateway.bounds_harness import MANY_LANES, Beside, assert_healthy_beside, beside, run_bounds
from gateway.request_path.test_gateway_hostile import AUTH, chat, stream, wait_records
from tokenpace.core.record import RequestRecord
from tokenpace.core.workload.prompt_shape import prompt_shape
from tokenpace.gateway.lifecycle.serve import RunningGateway
from tokenpace.gateway.messages import heads
from tokenpace.gateway.metering import relay
from tokenpace.gateway.request_path import proxy

LIVENESS_S = 10.0  # "it ended", not a timing measurement
SLOTS = 8  # model label slots for names nobody configured or listed


@pytest.mark.timing
def test_random_model_names_cannot_take_a_listed_models_label_beside_healthy_streams(tmp_path) -> None:
    async def body(gw: RunningGateway, s: aiohttp.ClientSession, records: list[RequestRecord], direct: float):
        async def hostile() -> None:
            async def lane(k: int) -> None:
                for i in range(5):
                    await stream(s, gw.url, f"plain-rand-{k}-{i}")

            await asyncio.gather(*(lane(k) for k in range(4)))  # 20 names for 8 slots
            assert gw.gateway.models_listed is not None  # half the slots went: the upstream was asked
            await asyncio.wait_for(gw.gateway.models_listed, LIVENESS_S)
            got, broke = await stream(s, gw.url, "plain-listed")  # listed, first seen after the flood
            assert got and not broke

        _, healthy = await beside(s, gw.url, gw.admin_url, hostile(), lanes=MANY_LANES)
        assert_healthy_beside(healthy, direct)
        await wait_records(records, len(healthy.ttft_s) + 21)
        assert all(r.labels["outcome"] == "ok" for r in records)  # the hostile ones too
        labels = [r.labels["model"] for r in records]
        assert labels.count("healthy") == len(healthy.ttft_s)  # (e) the real model keeps its label
        random = {m for m in labels if m.startswith("plain-rand-")}
        assert "other" in labels and len(random) < SLOTS  # the slots ran out ("healthy" holds one)
        assert labels.count("other") + len(random) == 20
        assert "plain-listed" in labels  # a listed model keeps its own label, however late it comes

    run_bounds(tmp_path, body, lanes=MANY_LANES, max_model_labels=SLOTS)


@pytest.mark.timing
def test_records_path_turned_fifo_beside_healthy_streams_and_shutdown_still_ends(tmp_path) -> None:
    path = tmp_path / "records.jsonl"
    seen: list[tuple[RunningGateway, Beside, float]] = []

    async def body(gw: RunningGateway, s: aiohttp.ClientSession, records: list[RequestRecord], direct: float):
        async def hostile() -> None:
            os.mkfifo(path.with_suffix(".fifo"))
            os.replace(path.with_suffix(".fifo"), path)  # no reader: a blocking open() would hang
            await asyncio.sleep(1.0)  # healthy traffic goes on while every batch fails

        _, healthy = await beside(s, gw.url, gw.admin_url, hostile(), lanes=MANY_LANES)
        assert_healthy_beside(healthy, direct)
        await wait_records(records, len(healthy.ttft_s))
        seen.append((gw, healthy, time.monotonic()))

    records = run_bounds(tmp_path, body, lanes=MANY_LANES, shutdown_timeout_s=2.0)
    gw, healthy, stopping = seen[0]
    assert time.monotonic() - stopping < LIVENESS_S  # shutdown ended, the FIFO still in place
    assert all(r.labels["outcome"] == "ok" for r in records)  # (a)
    sink = gw.gateway.sink  # (e): each batch failed at once, counted, never blocked the writer
    assert sink.write_errors >= 1 and sink.dropped >= len(healthy.ttft_s)


def _fail_for(model: str, original):
    """``original`` raising for the requests of ``model`` (a bug of ours on their path only)."""

    def wrapped(*args, **kw):
        records = [a for a in (*args, *kw.values()) if isinstance(a, RequestRecord)]
        records += [a.record for a in args if isinstance(getattr(a, "record", None), RequestRecord)]
        bodies = [a for a in args if isinstance(a, dict)]  # a request's parsed body
        named = [r.labels.get("model") for r in records] + [b.get("model") for b in bodies]
        if model in named:
            raise RuntimeError("injected fault")
        return original(*args, **kw)

    return wrapped


@pytest.mark.timing
def test_a_bug_of_ours_still_leaves_one_record_and_serving_goes_on(tmp_path, monkeypatch, caplog) -> None:
    monkeypatch.setattr(relay.Relay, "_meter", _fail_for("plain-relay-bug", relay.Relay._meter))
    monkeypatch.setattr(proxy, "response_head", _fail_for("plain-head-bug", heads.response_head))
    monkeypatch.setattr(proxy, "prompt_shape", _fail_for("plain-shape-bug", prompt_shape))

    async def body(gw: RunningGateway, s: aiohttp.ClientSession, records: list[RequestRecord], direct: float):
        async def hostile() -> tuple[list[int], bool]:
            statuses = []
            for model in ("plain-head-bug", "plain-shape-bug"):
                async with s.post(gw.url + "/v1/chat/completions", json=chat(model), headers=AUTH) as r:
                    statuses.append(r.status)
                    await r.read()
            _, broke = await stream(s, gw.url, "plain-relay-bug")
            return statuses, broke

        (statuses, broke), healthy = await beside(s, gw.url, gw.admin_url, hostile(), lanes=MANY_LANES)
        assert_healthy_beside(healthy, direct)
        assert statuses == [500, 500] and broke  # no head yet: a 500; mid-stream: the stream is cut
        await wait_records(records, len(healthy.ttft_s) + 3)
        got, broke = await stream(s, gw.url, "healthy")  # still serving
        assert got and not broke
        async with s.get(gw.admin_url + "/metrics") as r:
            text = await r.text()
        assert 'tokenpace_gateway_rejected_requests_total{reason="internal_error"} 3.0' in text, [
            line for line in text.splitlines() if "internal_error" in line
        ]

    with caplog.at_level(logging.INFO):
        records = run_bounds(tmp_path, body, lanes=MANY_LANES)
    bugs = {r.labels["model"]: r for r in records if "bug" in r.labels["model"]}
    assert len([r for r in records if "bug" in r.labels["model"]]) == 3  # one each, never two
    head, shape, mid = bugs["plain-head-bug"], bugs["plain-shape-bug"], bugs["plain-relay-bug"]
    assert head.labels["outcome"] == shape.labels["outcome"] == mid.labels["outcome"] == "internal_error"
    assert head.error == shape.error == mid.error == "internal error (RuntimeError)"
    assert head.status.value == shape.status.value == "http_error" and head.http_status == 500
    assert mid.status.value == "stream_interrupted"
    assert all(r.labels["outcome"] == "ok" for r in records if "bug" not in r.labels["model"])
    assert "Traceback" not in caplog.text and "injected fault" not in caplog.text
