"""OTLP/HTTP span export for every hop (client, gateway, simulated engine), from timestamps already
measured: spans are built after a request finished, with the ids its ``traceparent`` carried, so no
hot path does tracing work. The SDK's batch processor exports them from its own thread (its queue
is bounded: 2,048 spans, past which the SDK drops and counts). Closing is bounded too: ``close``
waits at most the time it is given (a hanging or refusing collector would hold it 30 s and more),
then returns how many spans were queued but never confirmed exported (dropped).

Needs the ``otlp`` extra (``pip install 'tokenpace[otlp]'``). Attributes follow the OpenTelemetry
GenAI conventions where they exist and carry no prompt, completion, user or key.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

CLIENT, SERVER, INTERNAL = "client", "server", "internal"
EXPORT_TIMEOUT_S = 2.0  # one batch's POST to the collector (the SDK's default is 10 s, then retries)


class _Counted:
    """The SpanExporter the batch processor calls: counts the spans the collector took."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.exported = 0

    def export(self, spans: Sequence[Any]) -> Any:
        result = self.inner.export(spans)
        if getattr(result, "name", "") == "SUCCESS":
            self.exported += len(spans)
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return bool(self.inner.force_flush(timeout_millis))


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

            exporter = OTLPSpanExporter(endpoint=endpoint, timeout=EXPORT_TIMEOUT_S)
        self._sdk = (Event, ReadableSpan, SpanContext, Status, StatusCode, TraceFlags)
        self._kinds = {CLIENT: SpanKind.CLIENT, SERVER: SpanKind.SERVER, INTERNAL: SpanKind.INTERNAL}
        self._resource = Resource.create({**(resource or {}), "service.name": service_name})
        self._scope = InstrumentationScope(f"tokenpace.{service_name}")
        self._counted = _Counted(exporter)
        self._processor = BatchSpanProcessor(self._counted)  # type: ignore[arg-type]  # duck-typed
        self.added = 0  # spans handed to the processor

    def add(self, span: SpanOut) -> None:
        """Queue one span for export (never blocks; the SDK drops past its bound)."""
        Event, ReadableSpan, SpanContext, Status, StatusCode, TraceFlags = self._sdk
        flags = TraceFlags(TraceFlags.SAMPLED)
        context = SpanContext(int(span.trace_id, 16), int(span.span_id, 16), False, flags)
        parent = None
        if span.parent_id:
            parent = SpanContext(int(span.trace_id, 16), int(span.parent_id, 16), True, flags)
        status = Status(StatusCode.ERROR, span.error) if span.error else Status(StatusCode.UNSET)
        self.added += 1
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

    @property
    def exported(self) -> int:
        return self._counted.exported

    def close(self, timeout_s: float | None = None) -> int:
        """Export what is queued, then stop, waiting at most ``timeout_s`` (None: as long as the
        SDK takes); returns the spans dropped (queued, never confirmed exported). Blocking: call
        from a thread in an event loop. Past the time the SDK's shutdown goes on in a daemon thread
        (what it still exports is not counted), so no collector holds the caller."""
        if timeout_s is None:
            self._processor.shutdown()
        else:
            closing = threading.Thread(target=self._processor.shutdown, name="otlp-close", daemon=True)
            closing.start()
            closing.join(max(0.0, timeout_s))
        return max(0, self.added - self._counted.exported)
