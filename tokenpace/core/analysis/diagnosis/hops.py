"""Where a request's time went, hop by hop, from its trace (issue 29's "follow the tail").

Pure: plain span data in (``Span``), numbers out; reading files is the app's job. A trace holds the
client's CLIENT span (the root), the gateway's SERVER span (its child, when a gateway was on the
path; the engine's parent is the gateway's upstream-call span below it, or in older traces the
SERVER span itself) and the engine's ``llm_request`` span (vLLM's shape, or the simulator's). The
client's TTFT is split into five hops that add up to it exactly (each hop's clock is its own
process's: across machines, clock offsets land in the network hops):

- ``client_gateway_ms``: client TTFT - gateway TTFT: the network (and client) between them, both ways.
- ``to_engine_ms``: the engine's arrival - the gateway's (or, without a gateway, the client's) start:
  the gateway's admission, routing and upstream connect, and the request's trip to the engine.
- ``queue_ms``, ``prefill_ms``: the engine's own (vLLM's time_in_queue, time_in_model_prefill).
- ``from_engine_ms``: the gateway's (or client's) first token - the engine's: the token's trip back.

``gateway_ms``, the part of ``to_engine_ms`` spent inside the gateway before the request left it
(admission, route, upstream connect), comes from the gateway's ``upstream wait`` span when the
trace has it; the rest of ``to_engine_ms`` is then the trip to the engine alone.

``decode_ms`` (first to last token in the engine) is shown beside them; it is not part of TTFT.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

ENGINE_SPAN = "llm_request"
UPSTREAM_WAIT_SPAN = "upstream wait"  # the gateway's: request written upstream .. first byte back
FIRST_TOKEN_EVENT = "gen_ai.first_token"
_OTLP_KINDS = {1: "internal", 2: "server", 3: "client", 4: "producer", 5: "consumer"}


@dataclass(frozen=True, slots=True)
class Span:
    trace_id: str
    span_id: str
    parent_id: str | None
    name: str
    kind: str  # internal, server, client, ...
    service: str
    start_ns: int
    end_ns: int
    attributes: Mapping[str, Any] = field(default_factory=dict)
    events: tuple[tuple[str, int], ...] = ()  # (name, Unix ns)

    def event_ns(self, name: str) -> int | None:
        return next((t for n, t in self.events if n == name), None)


@dataclass(frozen=True, slots=True)
class Hops:
    trace_id: str
    client_ttft_ms: float
    client_gateway_ms: float | None  # None: no gateway on the path
    to_engine_ms: float
    queue_ms: float
    prefill_ms: float
    from_engine_ms: float
    decode_ms: float
    # The gateway's own part of to_engine_ms: its arrival to the request written upstream
    # (admission, route, connect; one clock). None without the gateway's hop spans.
    gateway_ms: float | None = None


def _kind(value: Any) -> str:
    if isinstance(value, int):
        return _OTLP_KINDS.get(value, "unspecified")
    return str(value).lower().removeprefix("span_kind_")


def _otlp_value(v: Mapping[str, Any]) -> Any:
    """An OTLP JSON AnyValue: {"stringValue": ...}, {"intValue": "12"} (int64 as a string), ..."""
    for key, value in v.items():
        if key == "intValue":
            return int(value)
        if key == "arrayValue":
            return [_otlp_value(x) for x in value.get("values", [])]
        return value
    return None


def _otlp_attributes(kvs: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    return {kv["key"]: _otlp_value(kv.get("value") or {}) for kv in kvs}


def spans_from_json(obj: Mapping[str, Any]) -> list[Span]:
    """The spans of one JSON line: an OTLP JSON export (``resourceSpans``, as the OpenTelemetry
    Collector's file exporter writes) or one span as tokenpace's test receiver writes it."""
    if "resourceSpans" not in obj:
        return [
            Span(
                obj["trace_id"], obj["span_id"], obj.get("parent_id") or None, obj["name"],
                _kind(obj.get("kind", "")), obj.get("service", ""), int(obj["start_ns"]),
                int(obj["end_ns"]), obj.get("attributes") or {},
                tuple((e["name"], int(e["time_ns"])) for e in obj.get("events") or ()),
            )
        ]  # fmt: skip
    out: list[Span] = []
    for rs in obj["resourceSpans"]:
        service = _otlp_attributes((rs.get("resource") or {}).get("attributes", [])).get("service.name", "")
        for ss in rs.get("scopeSpans", []):
            for s in ss.get("spans", []):
                out.append(
                    Span(
                        s["traceId"].lower(), s["spanId"].lower(), s.get("parentSpanId", "").lower() or None,
                        s["name"], _kind(s.get("kind", 0)), service, int(s["startTimeUnixNano"]),
                        int(s["endTimeUnixNano"]), _otlp_attributes(s.get("attributes", [])),
                        tuple((e["name"], int(e["timeUnixNano"])) for e in s.get("events", [])),
                    )
                )  # fmt: skip
    return out


def by_trace(spans: Iterable[Span]) -> dict[str, list[Span]]:
    out: dict[str, list[Span]] = {}
    for s in spans:
        out.setdefault(s.trace_id, []).append(s)
    return out


def _ancestors(span: Span, ids: Mapping[str, Span]) -> list[Span]:
    """Its parent, the parent's parent, ... (nearest first; a cycle in bad data ends the walk)."""
    out: list[Span] = []
    seen = {span.span_id}
    parent = ids.get(span.parent_id or "")
    while parent is not None and parent.span_id not in seen:
        out.append(parent)
        seen.add(parent.span_id)
        parent = ids.get(parent.parent_id or "")
    return out


def _written_upstream_ns(trace: Sequence[Span], engine: Span) -> int | None:
    """When the gateway wrote the request to the engine: the start of the ``upstream wait`` span
    under the upstream call that is the engine's parent (gateways that export their hops)."""
    parent = engine.parent_id
    wait = next((s for s in trace if s.name == UPSTREAM_WAIT_SPAN and s.parent_id == parent), None)
    return wait.start_ns if wait is not None and parent else None


def hops(trace: Sequence[Span]) -> Hops | None:
    """The hops of one request's trace; None when its client or engine span, or a first token, is
    missing."""
    engine = next((s for s in trace if s.name == ENGINE_SPAN), None)
    if engine is None:
        return None
    # Above the engine: the gateway's upstream call (a CLIENT span; older gateways sent their
    # SERVER span itself as the parent), the gateway's SERVER span, then the client's CLIENT span.
    above = _ancestors(engine, {s.span_id: s for s in trace})
    gateway = next((s for s in above if s.kind == "server"), None)
    beyond = above[above.index(gateway) + 1 :] if gateway is not None else above
    client = next((s for s in beyond if s.kind == "client"), None)
    if client is None:
        return None
    a = engine.attributes
    try:
        engine_ttft_ns = float(a["gen_ai.latency.time_to_first_token"]) * 1e9
        queue_s, prefill_s = (
            float(a["gen_ai.latency.time_in_queue"]),
            float(a["gen_ai.latency.time_in_model_prefill"]),
        )
        decode_s = float(a["gen_ai.latency.time_in_model_decode"])
    except (KeyError, TypeError, ValueError):
        return None
    client_ft = client.event_ns(FIRST_TOKEN_EVENT)
    gateway_ft = gateway.event_ns(FIRST_TOKEN_EVENT) if gateway is not None else None
    if client_ft is None or (gateway is not None and gateway_ft is None):
        return None
    near = gateway if gateway is not None else client  # the hop in front of the engine
    near_ft = gateway_ft if gateway_ft is not None else client_ft
    client_ttft = client_ft - client.start_ns
    written = _written_upstream_ns(trace, engine) if gateway is not None else None
    return Hops(
        trace_id=engine.trace_id,
        client_ttft_ms=client_ttft / 1e6,
        client_gateway_ms=(client_ttft - (near_ft - near.start_ns)) / 1e6 if gateway is not None else None,
        to_engine_ms=(engine.start_ns - near.start_ns) / 1e6,
        queue_ms=queue_s * 1e3,
        prefill_ms=prefill_s * 1e3,
        from_engine_ms=(near_ft - (engine.start_ns + engine_ttft_ns)) / 1e6,
        decode_ms=decode_s * 1e3,
        gateway_ms=(written - near.start_ns) / 1e6 if written is not None else None,
    )
