"""Use case: run one benchmark — workload x schedule x client — and summarise its records."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from itertools import chain
from pathlib import Path
from time import perf_counter_ns

import numpy as np

from tokenpace.app import workloads
from tokenpace.app.bench_config import BenchConfig, BenchResult
from tokenpace.app.health import HealthMonitor
from tokenpace.app.observers import RunObservers
from tokenpace.app.preflight import resolve_model
from tokenpace.app.run_info import run_conditions, run_warnings, send_rate
from tokenpace.app.sessions import run_sessions
from tokenpace.client import Sender, parse_endpoint, tls_context
from tokenpace.client.dialects import get_dialect
from tokenpace.core.metrics import summarize
from tokenpace.core.record import RequestRecord, Status
from tokenpace.core.workload import WorkItem
from tokenpace.core.workload.sessions import SessionWorkload

# A run stops by itself when this many requests in a row could not even connect.
MAX_CONSECUTIVE_CONNECT_ERRORS = 50
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
        config.validate()
        self.scrape_path = scrape_path  # where raw /metrics scrapes go (default: a temp file)
        self.config = config
        self.run_id = run_id or uuid.uuid4().hex[:12]
        self.on_record = on_record
        self.records: list[RequestRecord] = []
        self.total_planned = (config.requests + config.warmup) if config.requests else None
        self._stop = asyncio.Event()
        self._stop_reason = ""
        self._interrupted = False
        self._consecutive_connect_errors = 0
        self._inflight: set[asyncio.Task] = set()
        # closed loop: measured requests wait until the warm-up ones are done
        self._warm_pending = config.warmup
        self._warm_done = asyncio.Event()
        if self._warm_pending == 0:
            self._warm_done.set()

    def stop(self, reason: str = "interrupted by the user") -> None:
        if not self._stop.is_set():
            self._interrupted = reason.startswith("interrupted")
            self._stop_reason = reason
            self._stop.set()
            self._warm_done.set()
            for task in list(self._inflight):
                task.cancel()

    async def run(self) -> BenchResult:
        cfg = self.config
        headers = dict(cfg.headers)
        if cfg.api_key:
            headers["Authorization"] = f"Bearer {cfg.api_key}"
        endpoint = parse_endpoint(cfg.url)
        tls = tls_context(cfg.tls_verify, cfg.ca_cert) if endpoint.tls else None
        model, served = await resolve_model(endpoint, cfg.model, headers, ssl_context=tls)
        dialect = get_dialect(cfg.api)
        observers = await RunObservers.create(
            endpoint, cfg.server_metrics, cfg.server_metrics_interval_s, cfg.connect_probe, self.scrape_path
        )
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
        )
        counter = await workloads.resolve_counter(cfg.workload_opts, endpoint, model, headers)
        workload = workloads.build(
            cfg.workload_opts, cfg.input_len, cfg.output_len, cfg.seed, counter, cfg.salt_key(self.run_id)
        )
        self.workload = workload
        prefix = cfg.request_id_prefix if cfg.request_id_prefix is not None else f"tp-{self.run_id}-"
        started_at = datetime.now(timezone.utc)
        anchor = {"perf_ns": perf_counter_ns(), "unix_ns": time.time_ns()}
        items = _prebuilt(self._requests(workload.items(), sender, prefix))
        monitor = HealthMonitor()
        await observers.start()
        monitor.start()
        t0 = perf_counter_ns()
        deadline_ns = t0 + int(cfg.duration_s * 1e9) if cfg.duration_s else None
        try:
            if self._stop.is_set():
                pass  # stopped (Ctrl-C) during the preparations: send nothing
            elif isinstance(workload, SessionWorkload):
                await run_sessions(self, workload, sender, prefix, t0, deadline_ns)
            elif cfg.open_loop:
                await self._open_loop(items, sender, t0, deadline_ns)
            else:
                await self._closed_loop(items, sender, deadline_ns)
        finally:
            try:
                await monitor.stop()
                await sender.close()
            finally:
                observed = await observers.stop(self.records, t0)
        if not self._stop_reason:
            self._stop_reason = "completed"
        summary = summarize(self.records, cfg.slo)
        summary.extra.update(workloads.summary_extra(workload, self.records))
        chunks = sum(len(r.token_ns) for r in self.records)
        lags = [(r.dispatched_ns - r.scheduled_ns) / 1e6 for r in self.records if r.dispatched_ns]
        health = monitor.report(chunks, lags, cfg.open_loop)
        conditions = run_conditions(
            cfg,
            self.workload.describe(),
            model,
            served,
            endpoint.url,
            started_at,
            anchor,
            prefix,
            sender.connections_opened,
        )
        conditions["observers"] = observers.describe()
        conditions["connections"] = {
            "reuse": not cfg.new_connection_per_request,
            "tls_verify": cfg.tls_verify,
            "ca_cert": cfg.ca_cert,
        }
        return BenchResult(
            self.run_id,
            conditions,
            self.records,
            summary,
            health,
            self._interrupted,
            self._stop_reason,
            run_warnings(cfg, summary, send_rate(self.records))
            + workloads.warnings(summary.extra)
            + health.warnings,
            observed,
        )

    # --- request stream ---
    def _requests(
        self, items: Iterator[WorkItem], sender: Sender, prefix: str
    ) -> Iterator[tuple[RequestRecord, bytes]]:
        """Records and prepared bytes, built before their send time; stops at the request limit."""
        cfg = self.config
        for item in items:
            if self.total_planned is not None and item.index >= self.total_planned:
                return
            rid = f"{prefix}{item.index}"
            record = RequestRecord(
                request_id=rid,
                index=item.index,
                warmup=item.index < cfg.warmup,
                labels=cfg.labels,
                prompt_tokens_requested=item.input_tokens,
                output_tokens_requested=item.output_tokens,
                prefix_id=item.prefix_id,
                prefix_cold=item.prefix_cold,
            )
            yield record, sender.prepare(item.prompt, item.output_tokens, rid, item.messages)

    async def _send(
        self, sender: Sender, record: RequestRecord, payload: bytes, capture: list[bytes] | None = None
    ) -> None:
        self.records.append(record)  # before sending: a cancelled request is still a record
        try:
            await sender.send(record, payload, capture)
        finally:
            if record.end_ns is None:  # cancelled before the client could mark it
                record.end_ns = perf_counter_ns()
                record.status = Status.CANCELLED
                record.error = "cancelled by the user"
            self._after(record)

    def _after(self, record: RequestRecord) -> None:
        if record.status is Status.CONNECT_ERROR:
            self._consecutive_connect_errors += 1
            if self._consecutive_connect_errors >= MAX_CONSECUTIVE_CONNECT_ERRORS:
                self.stop(
                    f"aborted: {MAX_CONSECUTIVE_CONNECT_ERRORS} requests in a row could not "
                    f"connect ({record.error})"
                )
        else:
            self._consecutive_connect_errors = 0
        if record.warmup and self._warm_pending > 0:
            self._warm_pending -= 1
            if self._warm_pending == 0:
                self._warm_done.set()
        if self.on_record is not None:
            try:
                self.on_record(record)
            except Exception as exc:  # e.g. the records file's disk is full: stop, keep what we have
                self.stop(f"aborted: could not save a record ({exc})")

    def _not_sent(self, record: RequestRecord, reason: str) -> None:
        """A scheduled request that never went out: kept as a record, not counted as sent."""
        record.end_ns = perf_counter_ns()
        record.status = Status.CANCELLED
        record.error = reason
        self.records.append(record)
        self._after(record)

    def _client_failed(self, exc: BaseException) -> None:
        """An unexpected error in the client's own code: stop loudly rather than lose a user."""
        self.stop(f"aborted: client error ({type(exc).__name__}: {exc})")

    # --- closed loop: N users, each sends its next request when the last one finished ---
    async def _closed_loop(
        self, items: Iterator[tuple[RequestRecord, bytes]], sender: Sender, deadline_ns: int | None
    ) -> None:
        async def user(worker: int) -> None:
            try:
                for record, payload in items:
                    if not record.warmup:
                        await self._warm_done.wait()  # measure warm, not alongside the warm-up
                    now = perf_counter_ns()
                    if self._stop.is_set() or (deadline_ns is not None and now >= deadline_ns):
                        return
                    record.worker = worker
                    record.scheduled_ns = record.dispatched_ns = now
                    await self._send(sender, record, payload)
            except Exception as exc:
                self._client_failed(exc)

        tasks = [asyncio.ensure_future(user(w)) for w in range(self.config.concurrency or 1)]
        self._inflight.update(tasks)
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*tasks, return_exceptions=True)

    # --- open loop: arrivals on their own clock, whatever the server does ---
    async def _open_loop(
        self, items: Iterator[tuple[RequestRecord, bytes]], sender: Sender, t0: int, deadline_ns: int | None
    ) -> None:
        cfg = self.config
        rng = np.random.default_rng(cfg.seed + 1)
        offsets = workloads.offsets(self.workload, cfg.rate or 1.0, cfg.arrival, rng, cfg.burstiness)
        cap = asyncio.Semaphore(cfg.max_concurrency) if cfg.max_concurrency else None
        loop = asyncio.get_running_loop()

        async def capped(record: RequestRecord, payload: bytes) -> None:
            try:
                if cap is None:
                    await self._send(sender, record, payload)
                    return
                async with cap:
                    if deadline_ns is not None and perf_counter_ns() >= deadline_ns:
                        self._not_sent(record, "still queued for the concurrency cap when --duration ended")
                        return
                    await self._send(sender, record, payload)
            except asyncio.CancelledError:
                if not record.sent_ns:  # cancelled while queued for the cap: never sent
                    self._not_sent(record, "cancelled while queued for the concurrency cap")
                raise
            except Exception as exc:
                self._client_failed(exc)

        async def dispatch() -> None:
            for (record, payload), offset in zip(items, offsets):  # noqa: B905 (both endless)
                scheduled = t0 + int(offset * 1e9)
                if self._stop.is_set() or (deadline_ns is not None and scheduled >= deadline_ns):
                    return
                delay = (scheduled - perf_counter_ns()) / 1e9
                if delay > 0:
                    await asyncio.sleep(delay)
                if self._stop.is_set():
                    return
                record.scheduled_ns = scheduled
                record.dispatched_ns = perf_counter_ns()
                task = loop.create_task(capped(record, payload))
                self._inflight.add(task)
                task.add_done_callback(self._inflight.discard)

        dispatcher = loop.create_task(dispatch())
        self._inflight.add(dispatcher)  # stop() cancels it with the requests in flight
        with contextlib.suppress(asyncio.CancelledError):
            await dispatcher
        self._inflight.discard(dispatcher)
        while self._inflight:
            await asyncio.gather(*list(self._inflight), return_exceptions=True)


def _prebuilt(
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
