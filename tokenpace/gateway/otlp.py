"""Optional OTLP traces: one span per generation request, an event at the first token.

Needs the ``otlp`` extra (``pip install 'tokenpace[otlp]'``: opentelemetry-sdk and the OTLP/HTTP
exporter). Spans are built when a request finishes, from the record's own timestamps, so the
streaming path does no tracing work; the SDK's batch processor exports them from its own thread.
Attributes follow the OpenTelemetry GenAI conventions where they exist; like the metrics, they
carry no prompt, completion, user or key.
"""

from __future__ import annotations

import time
from typing import Any

from tokenpace.core.record import RequestRecord

SCOPE = "tokenpace.gateway"
FIRST_TOKEN_EVENT = "gen_ai.first_token"


class MissingExtra(RuntimeError):
    pass


class Traces:
    def __init__(
        self, endpoint: str | None, service_name: str = "tokenpace-gateway", exporter: Any = None
    ) -> None:
        """``endpoint``: the collector's OTLP/HTTP traces URL (e.g. http://127.0.0.1:4318/v1/traces);
        ``exporter``: any SpanExporter instead (tests)."""
        try:
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor
            from opentelemetry.trace import SpanKind, Status, StatusCode
        except ImportError:
            raise MissingExtra(
                "--otlp-endpoint needs opentelemetry-sdk and opentelemetry-exporter-otlp-proto-http "
                "(pip install 'tokenpace[otlp]')"
            ) from None
        if exporter is None:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            exporter = OTLPSpanExporter(endpoint=endpoint)
        self._kind, self._status, self._code = SpanKind.SERVER, Status, StatusCode
        self.provider = TracerProvider(resource=Resource.create({"service.name": service_name}))
        self.provider.add_span_processor(BatchSpanProcessor(exporter))
        self.tracer = self.provider.get_tracer(SCOPE)
        self.offset_ns = time.time_ns() - time.perf_counter_ns()  # record clock -> Unix time

    def record(self, rec: RequestRecord, operation: str) -> None:
        """One finished request (called once per request, after the client has its last byte)."""
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
        span = self.tracer.start_span(
            f"{operation} {model}", kind=self._kind, attributes=attrs, start_time=rec.sent_ns + off
        )
        if rec.first_token_ns is not None:
            span.add_event(
                FIRST_TOKEN_EVENT,
                {"gen_ai.server.time_to_first_token": (rec.first_token_ns - rec.sent_ns) / 1e9},
                timestamp=rec.first_token_ns + off,
            )
        outcome = lab.get("outcome", "ok")
        if outcome != "ok":
            span.set_attribute("error.type", outcome)
            span.set_status(self._status(self._code.ERROR, rec.error or outcome))
        span.end(end_time=(rec.end_ns or rec.sent_ns) + off)

    def close(self) -> None:
        """Export what is queued, then stop (blocking: call from a thread)."""
        self.provider.shutdown()
