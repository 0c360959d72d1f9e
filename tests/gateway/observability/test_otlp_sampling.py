"""The gateway honours an incoming trace context's sampled flag: a request its caller left unsampled
(``traceparent`` flag 00, ``bench --otlp-sample``) gets no gateway span and no exemplar, keeps its
trace id in the record, and goes upstream with the flag unchanged."""

from __future__ import annotations

import asyncio
import re

import aiohttp
import pytest

from gateway.conftest import TracedGateway
from gateway.request_path.test_gateway import CHAT
from tokenpace.wire.tracecontext import parse_traceparent

pytest.importorskip("opentelemetry.sdk")
pytest.importorskip("opentelemetry.exporter.otlp.proto.http")

SAMPLED, UNSAMPLED = "4bf92f3577b34da6a3ce929d0e0e4736", "5cf92f3577b34da6a3ce929d0e0e4737"
PARENT = "00f067aa0ba902b7"
OPENMETRICS = {"Accept": "application/openmetrics-text; version=1.0.0; charset=utf-8"}


def test_an_unsampled_request_gets_no_span_no_exemplar_and_its_flag_passed_on(
    traced_gateway: TracedGateway,
) -> None:
    async def main() -> tuple[list[dict[str, str]], str]:
        async with traced_gateway.serving() as (gw, up), aiohttp.ClientSession() as s:
            for trace, flag in ((SAMPLED, "01"), (UNSAMPLED, "00")):
                headers = {"traceparent": f"00-{trace}-{PARENT}-{flag}"}
                async with s.post(
                    gw.url + "/v1/chat/completions", json={**CHAT, "stream": True}, headers=headers
                ) as r:
                    await r.read()
            async with s.get(gw.url + "/metrics", headers=OPENMETRICS) as r:
                metrics = await r.text()
        return up.seen_headers, metrics

    upstream_saw, metrics = asyncio.run(asyncio.wait_for(main(), 30))
    by_trace = {r.trace_id: r for r in traced_gateway.records}
    assert by_trace[SAMPLED].trace_sampled and not by_trace[UNSAMPLED].trace_sampled
    spans = traced_gateway.spans()  # the gateway's span and its hops: the sampled one only
    assert spans and {f"{sp.context.trace_id:032x}" for sp in spans} == {SAMPLED}
    sent_up = [h.get("traceparent") or h.get("Traceparent") or "" for h in upstream_saw]
    flags = {parse_traceparent(v)[0]: v[-2:] for v in sent_up if parse_traceparent(v)}  # type: ignore[index]
    assert flags == {SAMPLED: "01", UNSAMPLED: "00"}  # the caller's flag, unchanged, under our span
    assert all(PARENT not in v for v in sent_up)  # the gateway's own span is the upstream's parent
    exemplars = set(re.findall(r'# \{trace_id="([0-9a-f]{32})"\}', metrics))
    assert exemplars == {SAMPLED}, metrics  # an alert never points at a trace nobody recorded
