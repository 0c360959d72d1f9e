"""The gateway's own hops as child spans of its SERVER span, from times it takes at phase changes
only (never per chunk): a handful of clock reads per traced request, none when not tracing.

    chat m (SERVER)                  intake .. the response's end to the client
    ├── admission                    intake .. admitted: body read, parsed, memory budget checked
    ├── route                        the arm chosen, the record opened
    ├── upstream (CLIENT)            a connection asked for .. the upstream's last byte; its id is
    │   │                            the ``traceparent`` parent the engine is sent
    │   ├── connect                  dialled, or a kept-alive one reused (``tokenpace.connection.reused``)
    │   └── upstream wait            request written .. the upstream's first byte
    └── relay                        the upstream's first byte .. the response's end to the client
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tokenpace.adapters.otlp import CLIENT, INTERNAL, SpanOut
from tokenpace.core.analysis.diagnosis.hops import UPSTREAM_WAIT_SPAN
from tokenpace.core.record import RequestRecord
from tokenpace.wire.pool import SendTimes
from tokenpace.wire.tracecontext import new_span_id

UPSTREAM_SPAN = "upstream"
CHILD_SPANS = ("admission", "route", UPSTREAM_SPAN, "connect", UPSTREAM_WAIT_SPAN, "relay")
REUSED = "tokenpace.connection.reused"


@dataclass(slots=True)
class HopTimes(SendTimes):
    """One traced request's phase changes (``perf_counter_ns``, the record's clock); the pool fills
    in the upstream call's own (``SendTimes``)."""

    admitted_ns: int = 0  # admitted: read, parsed, within the memory budget
    routed_ns: int = 0  # its upstream chosen and its record opened
    upstream_span_id: str = field(default_factory=new_span_id)
    upstream_end_ns: int | None = None  # the upstream's last byte (None: it never ended cleanly)


def hop_spans(rec: RequestRecord, hops: HopTimes, gateway_span_id: str, off: int) -> list[SpanOut]:
    """The child spans of a finished request (``off``: record clock -> Unix time). A phase the
    request never reached (no connection, no first byte) has no span."""
    end = rec.end_ns or rec.sent_ns
    child = _Child(rec.trace_id or "", off)
    where = {"tokenpace.upstream": rec.labels.get("upstream", "")}
    out = [
        child("admission", rec.sent_ns, hops.admitted_ns, gateway_span_id),
        child(
            "route",
            hops.admitted_ns,
            hops.routed_ns,
            gateway_span_id,
            {**where, "tokenpace.arm": rec.labels.get("arm", "")},
        ),
    ]
    if not hops.asked_ns:  # it never asked for a connection
        return out
    up = hops.upstream_span_id
    call: dict[str, Any] = dict(where)
    if rec.http_status is not None:
        call["http.response.status_code"] = rec.http_status
    ended = hops.upstream_end_ns
    failed = rec.error or "the upstream call did not end"
    out.append(
        child(
            UPSTREAM_SPAN,
            hops.asked_ns,
            ended or end,
            gateway_span_id,
            call,
            CLIENT,
            up,
            None if ended else failed,
        )
    )
    connected = hops.connected_ns
    out.append(
        child(
            "connect",
            hops.asked_ns,
            connected or end,
            up,
            {REUSED: hops.reused},
            error=None if connected else failed,
        )
    )
    if hops.written_ns is not None and rec.headers_ns is not None:
        out.append(child(UPSTREAM_WAIT_SPAN, hops.written_ns, rec.headers_ns, up))
    if rec.headers_ns is not None:
        out.append(child("relay", rec.headers_ns, end, gateway_span_id))
    return out


@dataclass(frozen=True, slots=True)
class _Child:
    trace_id: str
    off: int

    def __call__(
        self,
        name: str,
        start: int,
        stop: int,
        parent: str,
        attributes: dict[str, Any] | None = None,
        kind: str = INTERNAL,
        span_id: str | None = None,
        error: str | None = None,
    ) -> SpanOut:
        return SpanOut(
            name, self.trace_id, span_id or new_span_id(), parent, start + self.off, stop + self.off, kind,
            attributes or {}, (), error,
        )  # fmt: skip
