"""Prometheus series of the shadow arms (``--mirror``), apart from the live ones so that no
dashboard or alert on live traffic ever counts a shadow request. Every family carries a ``shadow``
label (the mirror's name); label values are bounded: the configured mirrors, the record statuses,
three drop reasons, and the live model labels (already bounded by ``ModelLabels``)."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Histogram

from tokenpace.core.metrics import e2e_ns, tpot_ns, ttft_ns
from tokenpace.core.record import RequestRecord, Status
from tokenpace.gateway.observability.buckets import latency_buckets

NS = 1e9
DROP_REASONS = ("queue_full", "memory_budget", "shutdown")


class ShadowMetrics:
    def __init__(self, registry: CollectorRegistry, mirrors: tuple[str, ...]) -> None:
        r = registry
        self.ttft = Histogram(
            "tokenpace_gateway_shadow_time_to_first_token_seconds",
            "Time to first token of shadow copies (ok requests), from their send",
            ("shadow", "model"),
            registry=r,
            buckets=latency_buckets(None),
        )
        self.tpot = Histogram(
            "tokenpace_gateway_shadow_time_per_output_token_seconds",
            "Time per output token of shadow copies (ok requests)",
            ("shadow", "model"),
            registry=r,
            buckets=latency_buckets(None, 0.0001, 10.0),
        )
        self.e2e = Histogram(
            "tokenpace_gateway_shadow_request_duration_seconds",
            "Duration of shadow copies, every outcome",
            ("shadow", "model", "outcome"),
            registry=r,
            buckets=latency_buckets(None, 0.01, 1000.0),
        )
        self.requests = Counter(
            "tokenpace_gateway_shadow_requests", "Shadow copies by outcome", ("shadow", "outcome"), registry=r
        )
        self.dropped = Counter(
            "tokenpace_gateway_shadow_dropped",
            "Shadow copies not sent (queue full, memory budget, shutdown): never delayed into live traffic",
            ("shadow", "reason"),
            registry=r,
        )
        for name in mirrors:  # every series exists at 0 from the start
            for reason in DROP_REASONS:
                self.dropped.labels(name, reason)
            self.requests.labels(name, Status.OK.value)

    def drop(self, mirror: str, reason: str) -> None:
        self.dropped.labels(mirror, reason).inc()

    def observe(self, rec: RequestRecord) -> None:
        name, model = rec.labels.get("upstream", ""), rec.labels.get("model", "")
        self.requests.labels(name, rec.status.value).inc()
        e2e = e2e_ns(rec)
        if e2e is not None:
            self.e2e.labels(name, model, rec.status.value).observe(e2e / NS)
        if rec.status is not Status.OK:
            return
        t = ttft_ns(rec)
        if t is not None:
            self.ttft.labels(name, model).observe(t / NS)
        tp = tpot_ns(rec)
        if tp is not None:
            self.tpot.labels(name, model).observe(tp / NS)

    def emitter(
        self, put: Callable[[RequestRecord], None], also: Callable[[RequestRecord], None] | None
    ) -> Callable[[RequestRecord], None]:
        """A shadow copy's record goes to its own series and to the store (its own run), never to
        the live metrics; ``also`` (tests) sees it too."""

        def emit(record: RequestRecord) -> None:
            self.observe(record)
            put(record)
            if also is not None:
                also(record)

        return emit
