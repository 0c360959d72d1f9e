"""Use case: run one benchmark — workload x schedule x client — and summarise its records."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from itertools import chain
from pathlib import Path
from time import perf_counter_ns
from typing import Any

from tokenpace.app.bench import load_shapes
from tokenpace.app.run import workloads
from tokenpace.app.run.bench_config import BenchConfig, BenchResult
from tokenpace.app.run.outputs import SIGTERM_STOP, USER_STOP
from tokenpace.app.run.run_context import MAX_CONSECUTIVE_CONNECT_ERRORS, RunContext
from tokenpace.app.run.run_info import not_found_hint, run_conditions, run_warnings, send_rate
from tokenpace.app.watch.client_traces import start_trace
from tokenpace.app.watch.health import HealthMonitor, judge_stalls, own_stalls
from tokenpace.app.watch.heap import frozen_heap
from tokenpace.app.watch.observers import RunObservers
from tokenpace.app.watch.preflight import resolve_model_when_ready
from tokenpace.client import Sender
from tokenpace.core.analysis.diagnosis.silence import silence_summary
from tokenpace.core.asked_percentiles import asked_percentiles
from tokenpace.core.credentials import request_headers, secrets_of
from tokenpace.core.metrics import summarize
from tokenpace.core.record import RequestRecord
from tokenpace.core.steady import steady_state
from tokenpace.core.workload import WorkItem
from tokenpace.core.workload.sessions import SessionWorkload
from tokenpace.wire.descriptors import reserve_descriptors
from tokenpace.wire.dialects import get_dialect
from tokenpace.wire.endpoint import Endpoint, parse_endpoint, tls_context

__all__ = [
    "MAX_CONSECUTIVE_CONNECT_ERRORS",
    "SIGTERM_STOP",
    "USER_STOP",
    "BenchConfig",
    "BenchResult",
    "BenchRun",
]

PREBUILD_REQUESTS = 4096
PREBUILD_BYTES = 32 * 1024 * 1024


class BenchRun:
    """One run in progress. ``stop()`` (e.g. on Ctrl-C) ends it early; what was measured stays."""

    def __init__(
        self,
        config: BenchConfig,
        on_record: Callable[[RequestRecord], None] | None = None,
        run_id: str | None = None,
        scrape_path: Path | None = None,
    ) -> None:
        self.scrape_path = scrape_path  # where raw /metrics scrapes go (default: a temp file)
        self.config = config
        self.run_id = run_id or uuid.uuid4().hex[:12]
        self.on_record = on_record
        self.context = RunContext(config, on_record)

    @property
    def records(self) -> list[RequestRecord]:
        return self.context.records

    @property
    def total_planned(self) -> int | None:
        return self.context.total_planned

    def stop(self, reason: str = USER_STOP) -> None:
        self.context.stop(reason)

    async def run(self) -> BenchResult:
        cfg = self.config
        conn = await connect(cfg, self.scrape_path)
        sender = conn.sender
        counter = await workloads.resolve_counter(cfg.workload_opts, conn.endpoint, conn.model, conn.headers)
        workload = workloads.build(
            cfg.workload_opts, cfg.input_len, cfg.output_len, cfg.seed, counter, cfg.salt_key(self.run_id)
        )
        self.workload = workload
        prefix = cfg.request_id_prefix if cfg.request_id_prefix is not None else f"tp-{self.run_id}-"
        started_at = datetime.now(timezone.utc)
        anchor = {"perf_ns": perf_counter_ns(), "unix_ns": time.time_ns()}
        requests = self._requests(workload.items(), sender, prefix)
        if not isinstance(workload, SessionWorkload):  # sessions build each turn after the last answer
            requests = prebuilt(requests)
        shape = load_shapes.choose(cfg, workload, requests, sender, prefix)
        ctx = self.context
        ctx.sender = sender
        ctx.secrets = secrets_of(conn.headers)  # scrubbed from any error text a record keeps
        monitor = HealthMonitor()
        await conn.observers.start()
        observed = await self._measure(shape, monitor, sender, conn)
        if not ctx.stop_reason:
            ctx.stop_reason = "completed"
        summary = summarize(self.records, cfg.slo, open_loop=cfg.open_loop)
        steady = steady_state(self.records, None if cfg.open_loop else cfg.concurrency, cfg.ramp_excluded_s)
        summary.extra["steady"] = steady.to_dict()  # throughput without ramp-up and drain
        conn.observers.add_steady(observed, self.records, steady)  # GPUs and queue over that window
        if cfg.percentiles:  # --percentiles: each with its 95 % interval
            summary.extra["percentiles"] = asked_percentiles(self.records, cfg.percentiles)
        summary.extra.update(workloads.summary_extra(workload, self.records))
        summary.extra["silences"], silent = silence_summary(self.records)  # a server stall, any loop
        chunks = sum(len(r.token_ns) for r in self.records)
        lags = [(r.dispatched_ns - r.scheduled_ns) / 1e6 for r in self.records if r.dispatched_ns]
        health = monitor.report(chunks, lags, cfg.open_loop)
        stalls = {0: own_stalls(health)}  # one process: every record is worker 0's
        judge_stalls(health, stalls, health.stalls_dropped, self.records, cfg.stall_tolerance)
        conditions = run_conditions(
            cfg,
            workload.describe(),
            conn.model,
            conn.served,
            conn.endpoint.url,
            started_at,
            anchor,
            prefix,
            sender.connections_opened,
        )
        conditions["observers"] = conn.observers.describe()
        conditions["connections"] = {
            "reuse": not cfg.new_connection_per_request,
            "reuse_stopped": sender.keepalive.stopped,  # the server closes after answering
            "tls_verify": cfg.tls_verify,
            "ca_cert": cfg.ca_cert,
        }
        return BenchResult(
            self.run_id,
            conditions,
            self.records,
            summary,
            health,
            ctx.interrupted,
            ctx.stop_reason,
            _hints(conn.endpoint.url, conn.endpoint.base_path, self.records)
            + run_warnings(cfg, summary, send_rate(self.records))
            + workloads.warnings(summary.extra)
            + ([f"connections: {sender.keepalive.stopped}"] if sender.keepalive.stopped else [])
            + health.warnings
            + silent,
            observed,
            texts=ctx.texts,
        )

    async def _measure(
        self, shape: load_shapes.LoadShape, monitor: HealthMonitor, sender: Sender, conn: _Connection
    ) -> Any:
        """The measured window: the load driven until done or stopped; what the observers saw."""
        cfg, ctx = self.config, self.context
        reserve_descriptors(connections_ahead(cfg))  # the fd table grows now, not in the first wave
        with frozen_heap():  # no full collection of the start-up heap inside the measured window
            monitor.start()
            t0 = perf_counter_ns()
            deadline_ns = t0 + int(cfg.duration_s * 1e9) if cfg.duration_s else None
            try:
                if not ctx.stopping:  # stopped (Ctrl-C) during the preparations: send nothing
                    await shape.drive(ctx, t0, deadline_ns)
            finally:
                try:
                    await monitor.stop()
                    await sender.close()
                finally:
                    observed = await conn.observers.stop(self.records, t0, cfg.stream)
        return observed

    # --- request stream ---
    def _requests(
        self, items: Iterator[WorkItem], sender: Sender, prefix: str
    ) -> Iterator[tuple[RequestRecord, bytes]]:
        return build_requests(self.config, items, sender, prefix, self.total_planned)


def connections_ahead(cfg: BenchConfig) -> int:
    """How many connections a run may hold open at once, for the descriptor table: twice the users
    (a closed loop's first wave may open extra ones while keep-alive is still unknown) or the open
    loop's cap; an uncapped open loop gets room for 4,096."""
    cap = cfg.concurrency if not cfg.open_loop else cfg.max_concurrency
    return 2 * cap + 64 if cap else 4096


def new_record(cfg: BenchConfig, item: WorkItem, prefix: str) -> RequestRecord:
    """The record of one work item, before it is sent (or kept as never sent)."""
    return RequestRecord(
        request_id=f"{prefix}{item.index}",
        index=item.index,
        warmup=item.index < cfg.warmup,
        labels=cfg.labels,
        prompt_tokens_requested=item.input_tokens,
        output_tokens_requested=item.output_tokens,
        prefix_id=item.prefix_id,
        prefix_cold=item.prefix_cold,
    )


def build_requests(
    cfg: BenchConfig, items: Iterator[WorkItem], sender: Sender, prefix: str, total_planned: int | None
) -> Iterator[tuple[RequestRecord, bytes]]:
    """Records and prepared bytes, built before their send time; stops at the request limit."""
    for item in items:
        if total_planned is not None and item.index >= total_planned:
            return
        record = new_record(cfg, item, prefix)
        traceparent = start_trace(record, cfg.seed, cfg.otlp_sample) if cfg.otlp_endpoint else None
        yield (
            record,
            sender.prepare(item.prompt, item.output_tokens, record.request_id, item.messages, traceparent),
        )


@dataclass
class _Connection:
    endpoint: Endpoint
    headers: dict[str, str]
    model: str
    served: list[str]
    sender: Sender
    observers: RunObservers


async def connect(cfg: BenchConfig, scrape_path: Path | None) -> _Connection:
    """Before any load: the endpoint answers, the model is known, the watchers are ready."""
    endpoint = parse_endpoint(cfg.url)  # without the URL's user:password, kept as endpoint.auth
    headers = request_headers(cfg.headers, cfg.api_key, endpoint.auth)
    tls = tls_context(cfg.tls_verify, cfg.ca_cert) if endpoint.tls else None
    model, served = await resolve_model_when_ready(
        endpoint, cfg.model, headers, cfg.ready_check_timeout_s, tls
    )
    dialect = get_dialect(cfg.api)
    observers = await RunObservers.create(
        endpoint,
        cfg.server_metrics,
        cfg.server_metrics_interval_s,
        cfg.connect_probe,
        scrape_path,
        cfg.gpu_metrics,
    )
    if cfg.api == "realtime":
        from tokenpace.client.realtime import RealtimeSender  # aiohttp: a fifth of a second to import

        sender: Sender = RealtimeSender(
            endpoint,
            dialect,
            model,
            cfg.timeout_s,
            headers,
            not cfg.new_connection_per_request,
            tls,
            cfg.extra_body,
        )
        return _Connection(endpoint, headers, model, served, sender, observers)
    sender = Sender(
        endpoint,
        dialect,
        model,
        cfg.sampling,
        cfg.stream,
        cfg.timeout_s,
        headers,
        reuse_connections=not cfg.new_connection_per_request,
        ssl_context=tls,
        resend_unanswered=cfg.resend_unanswered,
        extra_body=cfg.extra_body,
    )
    return _Connection(endpoint, headers, model, served, sender, observers)


def _hints(url: str, base_path: str, records: list[RequestRecord]) -> list[str]:
    hint = not_found_hint(url, base_path, records)
    return [hint] if hint else []


def prebuilt(
    requests: Iterator[tuple[RequestRecord, bytes]],
) -> Iterator[tuple[RequestRecord, bytes]]:
    """Build the first requests before the clock starts, so that building them (tens of µs each)
    never delays timestamping other streams' chunks, e.g. when 256 closed-loop users restart
    together. Bounded in count and bytes; later requests are built as they are needed."""
    ready: list[tuple[RequestRecord, bytes]] = []
    size = 0
    for item in requests:
        ready.append(item)
        size += len(item[1])
        if len(ready) >= PREBUILD_REQUESTS or size >= PREBUILD_BYTES:
            break
    return chain(ready, requests)
