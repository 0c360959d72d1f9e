"""How a proxied request's record ends: once, with its outcome, whatever failed on the way.

``finish_record`` closes a record (outcome, blame, scrubbed error) and hands it to the sink first,
then to the metrics, the engine watch, tracing and ``on_record``: a fault in any of those cannot
lose the record. A record is finished once (``end_ns`` set): a second call does nothing, so the
safety net (``record_internal_error``, run at the request handler's outermost level for any
exception of ours) never records a request twice.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Protocol

from aiohttp import web

from tokenpace.core.credentials import scrub_secrets
from tokenpace.core.record import RequestRecord, Status
from tokenpace.gateway.metering.meter import Meter
from tokenpace.gateway.metering.outcome import STATUS, Outcome, internal_error_text
from tokenpace.gateway.metering.stream_stats import ItlCounts
from tokenpace.gateway.observability.engine_watch import EngineWatch
from tokenpace.gateway.observability.hop_spans import HopTimes
from tokenpace.gateway.observability.otlp import Traces
from tokenpace.gateway.observability.prom import GatewayMetrics
from tokenpace.gateway.recording.sink import RecordSink
from tokenpace.wire.dialects.base import Dialect

_NOT_OURS_TO_BLAME = (Outcome.HTTP_ERROR, Outcome.CONNECT_ERROR)


class Ends(Protocol):
    """What ending a record touches (the gateway's; ``traces`` may be replaced while it runs)."""

    secrets: tuple[str, ...]
    metrics: GatewayMetrics
    sink: RecordSink
    engines: EngineWatch | None
    traces: Traces | None
    on_record: Callable[[RequestRecord], None] | None


def finish_record(
    gw: Ends,
    record: RequestRecord | None,
    outcome: Outcome,
    error: str | None,
    meter: Meter | None,
    dialect: Dialect | None = None,
    itl: ItlCounts | None = None,
    status: Status | None = None,
    hops: HopTimes | None = None,
    secrets: tuple[str, ...] = (),
) -> None:
    """``secrets``: the credentials this request carried (config.secrets.request_secrets), scrubbed
    by value from its error beside the gateway's own."""
    if record is None or record.end_ns is not None:
        return  # finished already: one record per request
    record.end_ns = time.perf_counter_ns()
    try:
        if meter is not None and meter.protocol_error and outcome not in _NOT_OURS_TO_BLAME:
            # The stream broke first: what followed (the client leaving, a missing [DONE]) is a
            # consequence, kept after the reason.
            then = f"; then {error}" if error and outcome is not Outcome.PROTOCOL_ERROR else ""
            outcome, error = Outcome.PROTOCOL_ERROR, (meter.protocol_error + then)[:200]
        # an upstream may echo a key back in its error: the ones we hold by value, others by pattern
        record.error = scrub_secrets(error, (*gw.secrets, *secrets) if secrets else gw.secrets)
    except Exception as exc:
        outcome, status, record.error = Outcome.INTERNAL_ERROR, None, internal_error_text(exc)
    record.status = status or STATUS[outcome]
    record.labels["outcome"] = outcome.value
    gw.sink.put(record)  # first: whatever fails below, the record is kept
    gw.metrics.observe(record, itl)
    if gw.engines is not None:
        gw.engines.add(record)
    if gw.traces is not None:
        with contextlib.suppress(Exception):  # tracing must never fail a request
            gw.traces.record(record, dialect.operation if dialect else "chat", hops)
    if gw.on_record is not None:
        with contextlib.suppress(Exception):
            gw.on_record(record)


def record_internal_error(
    gw: Ends, request: web.Request, exc: Exception, record: RequestRecord | None
) -> None:
    """The safety net: an exception of ours ended the request. Its record (when it has one and it
    is not finished yet) says ``internal_error`` and the exception's type; a client that got the
    head already has its stream cut (it must not look complete). The caller re-raises, so the
    server answers 500 (or closes) and counts and logs it once, rate-limited."""
    head_sent = request.writer is not None and request.writer.output_size > 0
    if record is not None and record.end_ns is None:
        if not head_sent:
            record.http_status = 500  # what the client is about to get
        status = Status.STREAM_INTERRUPTED if head_sent else Status.HTTP_ERROR
        with contextlib.suppress(Exception):  # the net itself must not fail
            finish_record(gw, record, Outcome.INTERNAL_ERROR, internal_error_text(exc), None, status=status)
    if head_sent and request.transport is not None:
        request.transport.abort()
