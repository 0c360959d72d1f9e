"""Optional OTLP traces: the gateway's hop of each generation request's trace.

The gateway continues the trace its client started (W3C ``traceparent``; it starts one when none
came) and exports one SERVER span per request, with events (upstream first byte, first token, last
token) and its hops as child spans (hop_spans.py: admission, route, the upstream call with its
connect and wait, relay). The upstream call's span is the parent the upstream is sent, with the
caller's ``sampled`` flag: a request the caller left unsampled gets no span here either. Spans are
built when a request finishes, from the record's own timestamps and a few taken at phase changes,
so the streaming path does no tracing work (see adapters/otlp.py). Attributes carry no prompt,
completion, user or key; the resource carries the gateway's ``--label``s.
"""

from __future__ import annotations

import time
from typing import Any

from tokenpace.adapters.otlp import SERVER, MissingExtra, SpanExport, SpanOut
from tokenpace.core.record import RequestRecord
from tokenpace.gateway.observability.hop_spans import HopTimes, hop_spans
from tokenpace.wire import tracecontext as tc
from tokenpace.wire.tracecontext import new_span_id, new_trace_id

SCOPE = "tokenpace.gateway"
FIRST_TOKEN_EVENT = "gen_ai.first_token"

__all__ = ["FIRST_TOKEN_EVENT", "MissingExtra", "Traces", "join_trace", "with_traceparent"]


def join_trace(record: RequestRecord, traceparent: str | None, admitted_ns: int, routed_ns: int) -> HopTimes:
    """This hop's span of the request: in the incoming trace (its span the parent), or a new one;
    and the times its child spans are built from."""
    incoming = tc.parse_traceparent(traceparent)
    record.trace_id, record.parent_span_id = incoming or (new_trace_id(), None)
    record.span_id = new_span_id()
    record.trace_sampled = tc.is_sampled(traceparent)  # the caller left it out: no span, flag kept
    return HopTimes(admitted_ns=admitted_ns, routed_ns=routed_ns)


def with_traceparent(
    headers: list[tuple[str, str]], record: RequestRecord | None, hops: HopTimes | None
) -> list[tuple[str, str]]:
    """The upstream request's headers with our upstream call's span as the parent (W3C: the
    caller's span of that call) and the caller's sampled flag unchanged, when the request is traced."""
    if record is None or hops is None or record.trace_id is None:
        return headers
    kept = [(k, v) for k, v in headers if k.lower() != tc.HEADER]
    parent = tc.format_traceparent(record.trace_id, hops.upstream_span_id, record.trace_sampled)
    return [*kept, (tc.HEADER, parent)]


class Traces:
    def __init__(
        self,
        endpoint: str | None,
        service_name: str = "tokenpace-gateway",
        exporter: Any = None,
        labels: dict[str, str] | None = None,
    ) -> None:
        """``endpoint``: the collector's OTLP/HTTP traces URL (e.g. http://127.0.0.1:4318/v1/traces);
        ``exporter``: any SpanExporter instead (tests); ``labels``: the gateway's ``--label``s, as
        resource attributes."""
        self.export = SpanExport(endpoint, service_name, exporter, labels)
        self.offset_ns = time.time_ns() - time.perf_counter_ns()  # record clock -> Unix time

    def record(self, rec: RequestRecord, operation: str, hops: HopTimes | None = None) -> None:
        """One finished request (called once per request, after the client has its last byte), with
        its hops as child spans when their times were taken; none for a request its caller did not
        sample (``traceparent`` flag 00)."""
        if not rec.trace_sampled:
            return
        off = self.offset_ns
        lab = rec.labels
        model = lab.get("model", "unknown")
        attrs: dict[str, Any] = {
            "gen_ai.operation.name": operation,
            "gen_ai.request.model": model,
            "tokenpace.upstream": lab.get("upstream", ""),
            "tokenpace.arm": lab.get("arm", ""),
            "tokenpace.outcome": lab.get("outcome", ""),
            "tokenpace.request_id": rec.request_id,
        }
        if rec.http_status is not None:
            attrs["http.response.status_code"] = rec.http_status
        if rec.prompt_tokens is not None:
            attrs["gen_ai.usage.input_tokens"] = rec.prompt_tokens
        if rec.output_tokens:
            attrs["gen_ai.usage.output_tokens"] = rec.output_tokens
        if rec.finish_reason:
            attrs["gen_ai.response.finish_reasons"] = (rec.finish_reason,)
        events: list[tuple[str, int, dict[str, Any]]] = []
        if rec.headers_ns is not None:
            events.append(("upstream first byte", rec.headers_ns + off, {}))
        if rec.first_token_ns is not None:
            ttft = {"gen_ai.server.time_to_first_token": (rec.first_token_ns - rec.sent_ns) / 1e9}
            events.append((FIRST_TOKEN_EVENT, rec.first_token_ns + off, ttft))
        if len(rec.token_ns) > 1:
            events.append(("last token", rec.token_ns[-1] + off, {}))
        events.sort(key=lambda e: e[1])
        outcome = lab.get("outcome", "ok")
        error = None
        if outcome != "ok":
            attrs["error.type"] = outcome
            error = rec.error or outcome
        if rec.trace_id is None:  # a gateway without a trace context on the request: a root span
            rec.trace_id, rec.span_id = new_trace_id(), new_span_id()
        span_id = rec.span_id = rec.span_id or new_span_id()
        self.export.add(
            SpanOut(
                f"{operation} {model}",
                rec.trace_id,
                span_id,
                rec.parent_span_id,
                rec.sent_ns + off,
                (rec.end_ns or rec.sent_ns) + off,
                SERVER,
                attrs,
                events,
                error,
            )
        )
        for child in hop_spans(rec, hops, span_id, off) if hops is not None else ():
            self.export.add(child)

    def close(self, timeout_s: float | None = None) -> int:
        """Export what is queued, then stop, within ``timeout_s``; returns the spans dropped
        (blocking: call from a thread)."""
        return self.export.close(timeout_s)
