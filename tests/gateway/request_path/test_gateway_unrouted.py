"""A fault of ours before an upstream was chosen (reading the body, routing) still leaves exactly
one record: ``internal_error``, the exception's type, upstream and arm ``NO_UPSTREAM``; the client
gets a 500, it is counted, and serving goes on. Requests no dialect records get none."""

from __future__ import annotations

import asyncio

import aiohttp
import orjson
import pytest

from gateway.conftest import TracedGateway
from gateway.hostile_upstream import HEALTHY
from gateway.request_path.test_gateway import CHAT
from gateway.request_path.test_gateway_hostile import (
    AUTH,
    chat,
    metrics_text,
    stream,
    wait_records,
    with_hostile,
)
from tokenpace.core.record import RequestRecord, Status
from tokenpace.gateway.config.config import GatewayConfig, Upstream
from tokenpace.gateway.lifecycle.serve import RunningGateway
from tokenpace.gateway.recording.records import NO_UPSTREAM
from tokenpace.gateway.request_path import intake, router

FAULT = "x-inject-fault"  # the request header that makes the patched step fail


def _inject_faults(monkeypatch: pytest.MonkeyPatch) -> None:
    """``read_body`` fails for requests carrying ``FAULT: body``; routing, for model ``route-bug``."""
    read_body, choose = intake.read_body, router.Router.choose

    async def failing_read(request, *args, **kw):
        if request.headers.get(FAULT) == "body":
            raise RuntimeError("injected fault")
        return await read_body(request, *args, **kw)

    def failing_choose(self, model, key):
        if model == "route-bug":
            raise KeyError("injected fault")
        return choose(self, model, key)

    # as the proxy calls it
    monkeypatch.setattr("tokenpace.gateway.request_path.proxy.read_body", failing_read)
    monkeypatch.setattr(router.Router, "choose", failing_choose)


def test_a_fault_before_routing_leaves_one_unrouted_record(tmp_path, caplog, monkeypatch) -> None:
    _inject_faults(monkeypatch)
    statuses: list[int] = []

    async def body(gw: RunningGateway, s: aiohttp.ClientSession, records: list[RequestRecord]) -> None:
        for model, headers in (("body-bug", {FAULT: "body"}), ("route-bug", {})):
            url = gw.url + "/v1/chat/completions"
            async with s.post(url, json=chat(model), headers={**AUTH, **headers}) as r:
                statuses.append(r.status)
                await r.read()
        async with s.get(gw.url + "/v1/models", headers={**AUTH, FAULT: "body"}) as r:
            statuses.append(r.status)  # no dialect's path: answered 500, no record
        got, broke = await stream(s, gw.url, "healthy")  # still serving
        assert got == b"".join(HEALTHY) and not broke
        await wait_records(records, 3)
        text = await metrics_text(s, gw.url)
        assert 'tokenpace_gateway_rejected_requests_total{reason="internal_error"} 3.0' in text
        unrouted = (
            'requests_total{api="chat",arm="",model="unknown",outcome="internal_error",upstream=""} 2.0'
        )
        assert unrouted in text

    records = with_hostile(tmp_path, caplog, body)
    assert statuses == [500, 500, 500]
    assert len(records) == 3  # one each for the two chat requests, one for the healthy; none for GET
    failed = [r for r in records if r.labels["outcome"] != "ok"]
    assert len(failed) == 2
    for record in failed:
        assert record.labels["upstream"] == record.labels["arm"] == NO_UPSTREAM
        assert record.labels["outcome"] == "internal_error" and record.labels["api"] == "chat"
        assert record.labels["model"] == "unknown"  # the body may be unread: no model named
        assert record.status is Status.HTTP_ERROR and record.http_status == 500
        assert record.end_ns is not None and record.end_ns >= record.sent_ns > 0
    assert sorted(r.error or "" for r in failed) == [
        "internal error (KeyError)",
        "internal error (RuntimeError)",
    ]
    lines = [orjson.loads(line) for line in (tmp_path / "records.jsonl").read_bytes().splitlines()]
    assert sorted(d["labels"]["outcome"] for d in lines) == ["internal_error", "internal_error", "ok"]


def test_an_upstream_needs_a_name_the_empty_one_means_none_was_chosen() -> None:
    with pytest.raises(ValueError, match="needs a name"):
        GatewayConfig(upstreams=(Upstream(name=NO_UPSTREAM, url="http://127.0.0.1:1/v1"),))


def test_an_unrouted_record_is_a_span_in_the_callers_trace(
    monkeypatch, traced_gateway: TracedGateway
) -> None:
    _inject_faults(monkeypatch)
    trace_id, caller_span = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"

    async def main() -> None:
        headers = {FAULT: "body", "traceparent": f"00-{trace_id}-{caller_span}-01"}
        async with traced_gateway.serving() as (gw, _), aiohttp.ClientSession() as s:
            r = await s.post(gw.url + "/v1/chat/completions", json=CHAT, headers=headers)
            assert r.status == 500
            r.release()

    asyncio.run(asyncio.wait_for(main(), 30))
    (record,) = traced_gateway.records
    assert record.trace_id == trace_id and record.parent_span_id == caller_span
    (span,) = traced_gateway.spans()  # no hops: none was taken
    assert span.parent is not None and span.parent.span_id == int(caller_span, 16)
    attrs = dict(span.attributes or {})
    assert attrs["tokenpace.outcome"] == "internal_error" and attrs["tokenpace.upstream"] == NO_UPSTREAM
