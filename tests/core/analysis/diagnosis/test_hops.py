"""A request's TTFT split hop by hop from plain span data (core/analysis/diagnosis/hops.py), from both file
shapes: tokenpace's receiver lines and OTLP JSON as the OpenTelemetry Collector's file exporter
writes it."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from tokenpace.core.analysis.diagnosis.hops import by_trace, hops, spans_from_json

T = "0af7651916cd43dd8448eb211c80319c"
MS = 1_000_000


def _span(span_id: str, parent: str | None, name: str, kind: str, start_ms: float, end_ms: float, **kw: Any):
    return {
        "trace_id": T, "span_id": span_id, "parent_id": parent, "name": name, "kind": kind,
        "service": kw.pop("service", ""), "start_ns": int(start_ms * MS), "end_ns": int(end_ms * MS),
        "attributes": kw.pop("attributes", {}),
        "events": [{"name": n, "time_ns": int(t * MS), "attributes": {}} for n, t in kw.pop("events", [])],
    }  # fmt: skip


ENGINE_ATTRS = {
    "gen_ai.latency.time_in_queue": 0.030,
    "gen_ai.latency.time_in_model_prefill": 0.050,
    "gen_ai.latency.time_to_first_token": 0.080,
    "gen_ai.latency.time_in_model_decode": 0.400,
}


def _trace(with_gateway: bool = True) -> list[dict[str, Any]]:
    # client sends at 0, gateway receives at 10, engine at 15; engine first token at 95,
    # gateway's at 97, client's at 110.
    client = _span("c" * 16, None, "chat m", "client", 0, 520, events=[("gen_ai.first_token", 110)])
    gw = _span("9" * 16, "c" * 16, "chat m", "server", 10, 510, events=[("gen_ai.first_token", 97)])
    above = "9" * 16 if with_gateway else "c" * 16
    engine = _span("e" * 16, above, "llm_request", "server", 15, 495, attributes=ENGINE_ATTRS)
    return [client, gw, engine] if with_gateway else [client, engine]


def test_the_hops_add_up_to_the_client_ttft() -> None:
    spans = [s for d in _trace() for s in spans_from_json(d)]
    h = hops(spans)
    assert h is not None and h.trace_id == T
    assert h.client_ttft_ms == pytest.approx(110)
    assert h.client_gateway_ms == pytest.approx(110 - 87)  # the gateway's TTFT is 97 - 10
    assert h.to_engine_ms == pytest.approx(5) and h.from_engine_ms == pytest.approx(2)
    assert (h.queue_ms, h.prefill_ms, h.decode_ms) == pytest.approx((30, 50, 400))
    parts = (h.client_gateway_ms, h.to_engine_ms, h.queue_ms, h.prefill_ms, h.from_engine_ms)
    assert all(x is not None for x in parts)
    total = sum(x for x in parts if x is not None)
    assert total == pytest.approx(h.client_ttft_ms)


def test_the_gateways_upstream_call_as_the_engines_parent_gives_the_same_hops() -> None:
    """Gateways now send their upstream-call span (a CLIENT span under their SERVER span) as the
    engine's parent; traces of older gateways (the SERVER span itself) still read the same."""
    old = [s for d in _trace() for s in spans_from_json(d)]
    new = _trace()
    call = _span("a" * 16, "9" * 16, "upstream", "client", 12, 505, service="tokenpace-gateway")
    connect = _span("b" * 16, "a" * 16, "connect", "internal", 12, 12.1, service="tokenpace-gateway")
    new[2]["parent_id"] = "a" * 16
    spans = [s for d in [*new, call, connect] for s in spans_from_json(d)]
    assert hops(spans) == hops(old) and hops(spans) is not None
    # with its `upstream wait` span (written at 13), the gateway's own part of `to engine` is known
    wait = _span("d" * 16, "a" * 16, "upstream wait", "internal", 13, 94, service="tokenpace-gateway")
    h = hops([s for d in [*new, call, connect, wait] for s in spans_from_json(d)])
    assert h is not None and h.gateway_ms == pytest.approx(3) and h.to_engine_ms == pytest.approx(5)
    assert replace(h, gateway_ms=None) == hops(old)  # the rest is unchanged


def test_a_cycle_in_the_parent_links_ends_the_walk() -> None:
    spans = _trace()
    spans[0]["parent_id"] = "e" * 16  # the client under the engine: bad data, no infinite walk
    assert hops([s for d in spans for s in spans_from_json(d)]) is not None


def test_without_a_gateway_the_network_hops_are_measured_from_the_client() -> None:
    h = hops([s for d in _trace(with_gateway=False) for s in spans_from_json(d)])
    assert h is not None and h.client_gateway_ms is None
    assert h.to_engine_ms == pytest.approx(15) and h.from_engine_ms == pytest.approx(110 - 95)


def test_a_trace_missing_its_client_or_engine_span_has_no_hops() -> None:
    spans = [s for d in _trace() for s in spans_from_json(d)]
    assert hops([s for s in spans if s.name != "llm_request"]) is None
    assert hops([s for s in spans if s.kind != "client"]) is None


def _attr(k: str, v: Any) -> dict[str, Any]:
    return {"key": k, "value": {"doubleValue": v} if isinstance(v, float) else {"stringValue": v}}


def _otlp(service: str, span: dict[str, Any]) -> dict[str, Any]:
    """One OTLP JSON export line holding one span (ids hex, int64 times as strings)."""
    otlp_span = {
        "traceId": span["trace_id"].upper(), "spanId": span["span_id"],
        "parentSpanId": span["parent_id"] or "", "name": span["name"],
        "kind": {"client": 3, "server": 2}[span["kind"]],
        "startTimeUnixNano": str(span["start_ns"]), "endTimeUnixNano": str(span["end_ns"]),
        "attributes": [_attr(k, v) for k, v in span["attributes"].items()],
        "events": [{"timeUnixNano": str(e["time_ns"]), "name": e["name"]} for e in span["events"]],
    }  # fmt: skip
    resource = {"attributes": [_attr("service.name", service)]}
    return {"resourceSpans": [{"resource": resource, "scopeSpans": [{"scope": {}, "spans": [otlp_span]}]}]}


def test_otlp_json_lines_as_the_collector_writes_them_give_the_same_hops() -> None:
    plain = hops([s for d in _trace() for s in spans_from_json(d)])
    services = ("tokenpace-client", "tokenpace-gateway", "tokenpace-sim")
    spans = [s for svc, d in zip(services, _trace(), strict=True) for s in spans_from_json(_otlp(svc, d))]
    assert [s.service for s in spans] == list(services)
    assert [s.trace_id for s in spans] == [T] * 3 and spans[0].parent_id is None
    assert list(by_trace(spans)) == [T]
    assert hops(spans) == plain
