"""The client's hop of each request's trace (``bench --otlp-endpoint``): the trace started for each
request (``start_trace``: every request, a session's turns too, is the root of its own trace), and
one CLIENT span per traced request with the phases the client measured as events (DNS, connect,
TLS, request sent, first byte, first token, last token). Exported after the run from the records, so
sending and reading never do tracing work. A request ``--otlp-sample`` left out gets no span."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from tokenpace.adapters.otlp import CLIENT, MissingExtra, SpanExport, SpanOut
from tokenpace.core.record import RequestRecord, Status
from tokenpace.core.trace_sample import trace_sampled
from tokenpace.wire.tracecontext import format_traceparent, new_span_id, new_trace_id


def check_tracing(endpoint: str | None) -> None:
    """Refuse now, with the install hint, rather than after the load (ValueError)."""
    if not endpoint:
        return
    try:
        import opentelemetry.sdk.trace  # noqa: F401
    except ImportError:
        raise ValueError(str(MissingExtra("--otlp-endpoint needs pip install 'tokenpace[otlp]'"))) from None


def start_trace(record: RequestRecord, seed: int, share: float | None) -> str:
    """A new trace for the request about to be sent, the client's span its root: the ids go on the
    record, and the ``traceparent`` to send is returned. Sampled by the seed's hash of the record's
    index (``share``: ``--otlp-sample``, None for all); an unsampled request still sends its ids
    (flag 00), so the hops' records join on them, but no hop exports a span of it."""
    record.trace_id, record.span_id = new_trace_id(), new_span_id()
    record.trace_sampled = trace_sampled(seed, record.index, share or 1.0)
    return format_traceparent(record.trace_id, record.span_id, record.trace_sampled)


def client_span(rec: RequestRecord, offset_ns: int, model: str) -> SpanOut | None:
    if rec.trace_id is None or rec.span_id is None or not rec.sent_ns or not rec.trace_sampled:
        return None
    t0 = rec.sent_ns
    marks: list[tuple[str, int | None]] = []
    if rec.connect_ns is not None:  # a new connection: its phases, back to back from the send
        t = t0
        for name, took in (("dns", rec.dns_ns), ("connect", rec.tcp_ns), ("tls", rec.tls_ns)):
            if took is not None:
                t += took
                marks.append((f"{name} done", t))
    marks += [
        ("request sent", rec.request_ns),
        ("first byte", rec.headers_ns),
        ("gen_ai.first_token", rec.first_token_ns),
        ("last token", rec.token_ns[-1] if rec.token_ns else None),
    ]
    attrs: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": model,
        "tokenpace.request_id": rec.request_id,
        "tokenpace.status": rec.status.value,
    }
    if rec.http_status is not None:
        attrs["http.response.status_code"] = rec.http_status
    if rec.output_tokens:
        attrs["gen_ai.usage.output_tokens"] = rec.output_tokens
    if rec.first_token_ns is not None:
        attrs["tokenpace.ttft_ms"] = (rec.first_token_ns - t0) / 1e6
    return SpanOut(
        f"chat {model}",
        rec.trace_id,
        rec.span_id,
        None,
        t0 + offset_ns,
        (rec.end_ns or t0) + offset_ns,
        CLIENT,
        attrs,
        [(name, t + offset_ns, {}) for name, t in marks if t is not None],
        None if rec.status is Status.OK else (rec.error or rec.status.value),
    )


CLOSE_TIMEOUT_S = 2.0  # how long a run waits for the collector at its end (a hanging one)


def export_client_spans(
    records: Sequence[RequestRecord], endpoint: str, model: str = "", timeout_s: float = CLOSE_TIMEOUT_S
) -> tuple[int, int]:
    """Export the traced requests' client spans within ``timeout_s``; returns how many were queued
    and how many of them were dropped (never confirmed by the collector in time)."""
    export = SpanExport(endpoint, "tokenpace-client")
    offset = time.time_ns() - time.perf_counter_ns()  # record clock (CLOCK_MONOTONIC) -> Unix time
    n, dropped = 0, 0
    try:
        for rec in records:
            span = client_span(rec, offset, model or rec.labels.get("model", ""))
            if span is not None:
                export.add(span)
                n += 1
    finally:
        dropped = export.close(timeout_s)
    return n, dropped
