"""Prometheus metrics of the gateway, named after the OpenTelemetry GenAI conventions where they exist.

Labels are bounded in count and in size: model (capped in count, see ModelLabels, and every value
at most ``MAX_LABEL_BYTES``, see ``bounded_label``), upstream, arm, api (the registry's six APIs,
wire.dialects.APIS), outcome. Never a user, key or path.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable, Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from tokenpace.core.metrics import Slo, e2e_ns, tpot_ns, ttft_ns
from tokenpace.core.record import RequestRecord
from tokenpace.gateway.metering.outcome import Outcome
from tokenpace.gateway.metering.stream_stats import ItlCounts, bounds_ns
from tokenpace.gateway.observability.buckets import TOKEN_BUCKETS, latency_buckets

NS = 1e9
LABELS = ("model", "upstream", "arm", "api")

TTFT = "gen_ai_server_time_to_first_token_seconds"
TPOT = "gen_ai_server_time_per_output_token_seconds"
E2E = "gen_ai_server_request_duration_seconds"
TOKENS = "gen_ai_client_token_usage"
ITL = "tokenpace_gateway_inter_token_latency_seconds"
REQUESTS = "tokenpace_gateway_requests_total"
DROPPED = "tokenpace_gateway_records_dropped_total"
UNPLACED = "tokenpace_gateway_records_unplaced_total"
IN_FLIGHT = "tokenpace_gateway_requests_in_flight"
# the request outcomes that count as errors, as a PromQL regex (alert rules, per arm and overall)
ERROR_OUTCOMES = (
    "http_error|connect_error|timeout_before_first_token|stall|upstream_abort_mid_stream|protocol_error"
    "|internal_error"
)


# Bytes of a label value that comes from a request or an upstream (a model name): longer values keep
# their first bytes and a hash of the whole, so two long names stay apart and a page stays small.
MAX_LABEL_BYTES = 128
_HASH_HEX = 12


def bounded_label(value: str) -> str:
    """``value`` if it is at most ``MAX_LABEL_BYTES`` bytes of UTF-8; else its first bytes (whole
    characters), "~" and a hash of the whole value, ``MAX_LABEL_BYTES`` bytes at most."""
    if len(value) <= MAX_LABEL_BYTES // 4:  # a character is at most 4 bytes: no need to encode
        return value
    raw = value.encode("utf-8", "surrogatepass")
    if len(raw) <= MAX_LABEL_BYTES:
        return value
    digest = hashlib.blake2b(raw, digest_size=_HASH_HEX // 2).hexdigest()
    head = raw[: MAX_LABEL_BYTES - _HASH_HEX - 1].decode("utf-8", "ignore")
    return f"{head}~{digest}"


# A value longer than this (in characters) is bounded on a worker thread (``model_label``): its hash
# grows with its size, up to the body limit (--max-body, 4 MiB: ~9 ms of blake2b), and blake2b lets
# the loop run meanwhile (it releases the GIL on large buffers). Shorter: a few microseconds here.
HASH_ON_LOOP_CHARS = 16 * 1024


async def model_label(model: str | None) -> str | None:
    """``bounded_label(model)`` (None stays None), a long value hashed off the loop; what a record's
    ``ModelLabels`` then takes unchanged (a bounded value is its own bound)."""
    if model is None or len(model) <= HASH_ON_LOOP_CHARS:
        return model
    return await asyncio.to_thread(bounded_label, model)


class ModelLabels:
    """Maps request model names onto label values. Configured models (an upstream's ``model=``,
    or listed at its /v1/models: ``reserve``) always keep their own; any other name a client sends
    takes one of ``limit`` overflow slots, first come, then becomes "other". When half the slots
    are taken, ``on_filling`` runs once (the gateway then asks its upstreams which models they list).
    Every value is bounded in bytes (``bounded_label``), a configured one too."""

    def __init__(
        self, configured: set[str], limit: int, on_filling: Callable[[], None] | None = None
    ) -> None:
        self.reserved = {bounded_label(name) for name in configured}
        self.seen: set[str] = set()  # unconfigured names given a slot
        self.limit = limit
        self.on_filling = on_filling

    def reserve(self, names: Iterable[str]) -> None:
        """Configured from now on (the caller bounds how many: model_list.MAX_LISTED per upstream)."""
        self.reserved.update(bounded_label(name) for name in names)

    def __call__(self, model: str | None) -> str:
        if not model:
            return "unknown"
        model = bounded_label(model)
        if model in self.reserved or model in self.seen:
            return model
        if len(self.seen) < self.limit:
            self.seen.add(model)
            if len(self.seen) >= self.limit // 2 and self.on_filling is not None:
                self.on_filling()
                self.on_filling = None
            return model
        return "other"


class GatewayMetrics:
    def __init__(self, slo: Slo, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.slo = slo
        r = self.registry
        self._latency(slo)
        self.tokens = Histogram(
            TOKENS,
            "Tokens per request, by gen_ai_token_type (input/output)",
            (*LABELS, "gen_ai_token_type"),
            registry=r,
            buckets=TOKEN_BUCKETS,
        )
        self.requests = Counter(
            REQUESTS.removesuffix("_total"), "Requests by outcome", (*LABELS, "outcome"), registry=r
        )
        self.dropped = Counter(
            DROPPED.removesuffix("_total"),
            "Records not written because the writer queue was full",
            registry=r,
        )
        self.unplaced = Counter(
            UNPLACED.removesuffix("_total"),
            "Records the store writer had no run for (their upstream in no config of their epoch)",
            registry=r,
        )
        # livesum: with --workers, the sum over the live worker processes
        self.in_flight = Gauge(
            IN_FLIGHT, "Requests being proxied now", registry=r, multiprocess_mode="livesum"
        )

    def _latency(self, slo: Slo) -> None:
        """The latency histograms, their bounds drawn from the SLOs (every threshold a bound)."""
        r = self.registry
        self.slo = slo
        self.ttft_buckets = latency_buckets(slo.ttft_ms / 1000 if slo.ttft_ms else None)
        self.tpot_buckets = latency_buckets(slo.tpot_ms / 1000 if slo.tpot_ms else None, 0.0001, 10.0)
        self.e2e_buckets = latency_buckets(slo.e2e_ms / 1000 if slo.e2e_ms else None, 0.01, 1000.0)
        self.ttft = Histogram(
            TTFT,
            "Time to first token seen by the gateway (ok streamed requests)",
            LABELS,
            registry=r,
            buckets=self.ttft_buckets,
        )
        self.tpot = Histogram(
            TPOT,
            "Time per output token after the first (ok requests)",
            LABELS,
            registry=r,
            buckets=self.tpot_buckets,
        )
        self.e2e = Histogram(
            E2E,
            "Request duration at the gateway, every outcome",
            (*LABELS, "outcome"),
            registry=r,
            buckets=self.e2e_buckets,
        )
        self._itl_bounds_ns = bounds_ns(self.tpot_buckets)
        self.itl = Histogram(
            ITL,
            "Gaps between token-carrying chunks (a chunk may carry several tokens)",
            LABELS,
            registry=r,
            buckets=self.tpot_buckets,
        )

    def redraw(self, slo: Slo) -> None:
        """A live change of the SLOs: new latency histograms on the new SLOs' bounds, so that each
        bucket the new alert rules name is exported (the series restart from zero, under the new
        config epoch's label; a request begun before adds no inter-token gaps to them)."""
        if slo == self.slo:
            return
        for old in (self.ttft, self.tpot, self.e2e, self.itl):
            self.registry.unregister(old)
        self._latency(slo)

    def itl_counts(self) -> ItlCounts:
        """A request's inter-token gaps, bucketed as they arrive (``observe`` adds them at its end)."""
        return ItlCounts(self._itl_bounds_ns)

    def observe(self, rec: RequestRecord, itl: ItlCounts | None = None) -> None:
        """One finished generation request. Latency histograms take ok requests only (as offline);
        its inter-token gaps come bucketed already (``itl``): no per-gap work at the end."""
        lab = rec.labels
        key = (lab.get("model", "unknown"), lab.get("upstream", ""), lab.get("arm", ""), lab.get("api", ""))
        outcome = lab.get("outcome", Outcome.OK.value)
        self.requests.labels(*key, outcome).inc()
        e2e = e2e_ns(rec)
        if e2e is not None:
            self.e2e.labels(*key, outcome).observe(e2e / NS)
        if outcome != Outcome.OK.value:
            return
        t = ttft_ns(rec)
        if t is not None:
            # alert -> its traces (only a sampled one: an unsampled trace id leads to no span)
            exemplar = {"trace_id": rec.trace_id} if rec.trace_id and rec.trace_sampled else None
            self.ttft.labels(*key).observe(t / NS, exemplar=exemplar)
        tp = tpot_ns(rec)
        if tp is not None:
            self.tpot.labels(*key).observe(tp / NS)
        if itl is not None and itl.bounds_ns is self._itl_bounds_ns:  # not drawn before a redraw
            itl.add_to(self.itl.labels(*key))
        if rec.prompt_tokens is not None:
            self.tokens.labels(*key, "input").observe(rec.prompt_tokens)
        if rec.output_tokens:
            self.tokens.labels(*key, "output").observe(rec.output_tokens)


REJECTED = "tokenpace_gateway_rejected_requests_total"
CLOSED = "tokenpace_gateway_connections_closed_total"
OPEN = "tokenpace_gateway_connections_open"
# Bounded label values, listed so that each series exists (at 0) from the start.
REJECT_REASONS = (
    "unauthorized",  # missing or wrong client key (401)
    "admin_unauthorized",  # missing or wrong admin key on /metrics or /tokenpace/* (401)
    "body_too_large",  # 413
    "body_compressed",  # a compressed body to a measured API, refused unread (415)
    "body_not_json",  # 400
    "body_not_object",  # 400
    "body_incomplete",  # the client broke its own body (bad chunking, closed mid-body)
    "bad_request_line",
    "bad_method",
    "bad_url",
    "bad_header",
    "line_too_long",
    "malformed_http",
    "draining",  # a new request while the gateway stops (503: the open ones finish)
    "memory_budget",  # a non-streamed request while response bodies held fill the budget (503)
    "internal_error",  # a bug of ours: 500, one log line, never a traceback
)
CLOSE_REASONS = ("header_timeout", "body_timeout", "idle_timeout", "max_connections")


class GuardMetrics:
    """What the gateway refused or cut on its client side, by reason."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.rejected = Counter(
            REJECTED.removesuffix("_total"),
            "Requests the gateway answered itself, not forwarded, by reason",
            ("reason",),
            registry=registry,
        )
        self.closed = Counter(
            CLOSED.removesuffix("_total"),
            "Client connections the gateway closed or refused, by reason",
            ("reason",),
            registry=registry,
        )
        self.open = Gauge(OPEN, "Client connections open now", registry=registry, multiprocess_mode="livesum")
        for r in REJECT_REASONS:
            self.rejected.labels(r)
        for r in CLOSE_REASONS:
            self.closed.labels(r)
