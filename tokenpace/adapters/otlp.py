"""OTLP/HTTP span export for every hop (client, gateway, simulated engine), from timestamps already
measured: spans are built after a request finished, with the ids its ``traceparent`` carried, so no
hot path does tracing work. The SDK's batch processor exports them from its own thread (its queue
is bounded: 2,048 spans, past which the SDK drops and counts).

Needs the ``otlp`` extra (``pip install 'tokenpace[otlp]'``). Attributes follow the OpenTelemetry
GenAI conventions where they exist and carry no prompt, completion, user or key.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

CLIENT, SERVER, INTERNAL = "client", "server", "internal"


class MissingExtra(RuntimeError):
    pass


@dataclass(slots=True)
class SpanOut:
    name: str
    trace_id: str  # 32 hex
    span_id: str  # 16 hex
    parent_id: str | None  # 16 hex, or None for a root
    start_unix_ns: int
    end_unix_ns: int
    kind: str = INTERNAL
    attributes: Mapping[str, Any] = field(default_factory=dict)
    events: Sequence[tuple[str, int, Mapping[str, Any]]] = ()  # (name, unix ns, attributes)
    error: str | None = None


class SpanExport:
    def __init__(
        self,
        endpoint: str | None,
        service_name: str,
        exporter: Any = None,
        resource: Mapping[str, str] | None = None,
    ) -> None:
        """``endpoint``: the collector's OTLP/HTTP traces URL (http://127.0.0.1:4318/v1/traces);
        ``exporter``: any SpanExporter instead (tests); ``resource``: more resource attributes (a
        gateway's static labels)."""
        try:
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.trace import Event, ReadableSpan
            from opentelemetry.sdk.trace.export import BatchSpanProcessor
            from opentelemetry.sdk.util.instrumentation import InstrumentationScope
            from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags
        except ImportError:
            raise MissingExtra(
                "--otlp-endpoint needs opentelemetry-sdk and opentelemetry-exporter-otlp-proto-http "
                "(pip install 'tokenpace[otlp]')"
            ) from None
        if exporter is None:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            exporter = OTLPSpanExporter(endpoint=endpoint)
        self._sdk = (Event, ReadableSpan, SpanContext, Status, StatusCode, TraceFlags)
        self._kinds = {CLIENT: SpanKind.CLIENT, SERVER: SpanKind.SERVER, INTERNAL: SpanKind.INTERNAL}
        self._resource = Resource.create({**(resource or {}), "service.name": service_name})
        self._scope = InstrumentationScope(f"tokenpace.{service_name}")
        self._processor = BatchSpanProcessor(exporter)

    def add(self, span: SpanOut) -> None:
        """Queue one span for export (never blocks; the SDK drops past its bound)."""
        Event, ReadableSpan, SpanContext, Status, StatusCode, TraceFlags = self._sdk
        flags = TraceFlags(TraceFlags.SAMPLED)
        context = SpanContext(int(span.trace_id, 16), int(span.span_id, 16), False, flags)
        parent = None
        if span.parent_id:
            parent = SpanContext(int(span.trace_id, 16), int(span.parent_id, 16), True, flags)
        status = Status(StatusCode.ERROR, span.error) if span.error else Status(StatusCode.UNSET)
        self._processor.on_end(
            ReadableSpan(
                span.name,
                context=context,
                parent=parent,
                resource=self._resource,
                attributes=dict(span.attributes),
                events=[Event(n, dict(a), timestamp=t) for n, t, a in span.events],
                kind=self._kinds[span.kind],
                status=status,
                start_time=span.start_unix_ns,
                end_time=max(span.end_unix_ns, span.start_unix_ns),
                instrumentation_scope=self._scope,
            )
        )

    def close(self) -> None:
        """Export what is queued, then stop (blocking: call from a thread in an event loop)."""
        self._processor.shutdown()
