"""Use case: one bench run sent by several worker processes (``--workers N|auto``).

The parent does what a single process does before and after the load (pre-flight, workload,
server-metrics scraping, summary) and deals the one schedule to the workers (``core.workload.split``:
open loop, the single process's arrival offsets round-robin; closed loop, the users split evenly).
Every worker builds the same workload (same seed, salt and request ids) and sends its share from
one shared start time (CLOCK_MONOTONIC is the same clock in every process on a machine). Records
stream back as they end and are written by the parent; a worker that dies leaves its requests in
flight and not yet sent as records saying so, and the run NOT VALID.
"""

from __future__ import annotations

import asyncio
import dataclasses
import multiprocessing
import os
import time
import uuid
from collections.abc import Callable
from datetime import datetime, timezone
from itertools import islice, takewhile
from pathlib import Path
from time import perf_counter_ns
from typing import Any

from tokenpace.app.bench import load_shapes
from tokenpace.app.bench.bench import BenchRun, connect
from tokenpace.app.run import workloads
from tokenpace.app.run.bench_config import BenchConfig, BenchResult
from tokenpace.app.run.outputs import USER_STOP
from tokenpace.app.run.run_info import not_found_hint, run_conditions, run_warnings, send_rate
from tokenpace.app.watch.health import judge_stalls, own_stalls
from tokenpace.app.watch.observers import RunObservers
from tokenpace.app.workers.worker_health import combined_health
from tokenpace.app.workers.worker_lost import WorkerLink, lost_records
from tokenpace.app.workers.worker_proc import WorkerSpec, clock_identity, worker_main
from tokenpace.core.analysis.diagnosis.silence import silence_summary
from tokenpace.core.asked_percentiles import asked_percentiles
from tokenpace.core.metrics import summarize
from tokenpace.core.record import RequestRecord
from tokenpace.core.schedule.split import dealt_offsets, owner_of, split_users, workers_needed
from tokenpace.core.steady import steady_state

START_LEAD_NS = 50_000_000  # the shared start is this far after the last worker said ready
JOIN_TIMEOUT_S = 10.0


def usable_cores() -> list[int]:
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


def worker_count(config: BenchConfig, cores: int | None = None) -> int:
    """The workers a run uses: as asked, or (auto) as many as its load needs, up to the cores; a
    closed loop never gets more workers than users."""
    # a closed loop's users, or an open loop's cap on requests in flight, are split between workers
    users = config.max_concurrency if config.open_loop else (config.concurrency or 1)
    if config.workers == "auto":
        cores = cores if cores is not None else len(usable_cores())
        return workers_needed(config.rate, users, config.output_len.mean, cores)
    count = int(config.workers)
    return min(count, users) if users else count


class WorkerRun:
    """Like ``BenchRun`` (same constructor, ``run()``, ``stop()``, ``records``), over processes."""

    def __init__(
        self,
        config: BenchConfig,
        on_record: Callable[[RequestRecord], None] | None = None,
        run_id: str | None = None,
        scrape_path: Path | None = None,
        start_method: str = "spawn",
    ) -> None:
        self.config = config
        self.on_record = on_record
        self.run_id = run_id or uuid.uuid4().hex[:12]
        self.scrape_path = scrape_path
        self.start_method = start_method
        self.count = worker_count(config)
        self.records: list[RequestRecord] = []
        self.total_planned = (config.requests + config.warmup) if config.requests else None
        self.links: list[WorkerLink] = []
        self.stop_reason = ""
        self.interrupted = False
        self.clock: dict[str, Any] = {}
        self.kind = f"processes ({start_method})"
        self.observers: RunObservers | None = None  # the parent's, once connected

    @property
    def worker_pids(self) -> list[int | None]:
        return [link.process.pid for link in self.links]

    def stop(self, reason: str = USER_STOP) -> None:
        if self.stop_reason:
            return
        self.stop_reason = reason
        self.interrupted = reason.startswith("interrupted")
        for link in self.links:
            link.tell(("stop", reason))

    async def run(self) -> BenchResult:
        cfg = self.config
        conn = await connect(cfg, self.scrape_path)  # pre-flight and observers: the parent's alone
        await conn.sender.close()
        counter = await workloads.resolve_counter(cfg.workload_opts, conn.endpoint, conn.model, conn.headers)
        workload = workloads.build(
            cfg.workload_opts, cfg.input_len, cfg.output_len, cfg.seed, counter, cfg.salt_key(self.run_id)
        )
        prefix = cfg.request_id_prefix if cfg.request_id_prefix is not None else f"tp-{self.run_id}-"
        started_at = datetime.now(timezone.utc)
        anchor = {"perf_ns": perf_counter_ns(), "unix_ns": time.time_ns()}
        specs = self._specs(dataclasses.replace(cfg, model=conn.model), workload)
        t0 = perf_counter_ns()
        await conn.observers.start()  # from here on, stopped whatever happens
        try:
            await self._start_workers(specs)
            await asyncio.gather(*(link.ready for link in self.links))
            self.clock = await self._align_clocks()
            t0 = perf_counter_ns() + START_LEAD_NS
            for link in self.links:  # the one start time, on each worker's own clock
                link.tell(
                    ("stop", self.stop_reason) if self.stop_reason else ("start", t0 + link.clock_offset_ns)
                )
            await asyncio.gather(*(link.ended for link in self.links))
        finally:
            await self._reap()
            observed = await conn.observers.stop(self.records, t0, cfg.stream)
        health = self._health(workload, prefix, t0)
        conditions = run_conditions(
            cfg, workload.describe(), conn.model, conn.served, conn.endpoint.url, started_at, anchor, prefix,
            sum(link.done.connections_opened for link in self.links if link.done),
        )  # fmt: skip
        conditions["observers"] = conn.observers.describe()
        self.observers = conn.observers
        return self._result(conn.endpoint, workload, conditions, health, observed)

    def _result(
        self, endpoint: Any, workload: Any, conditions: dict[str, Any], health: Any, observed: dict[str, Any]
    ) -> BenchResult:
        """Summarised over every worker's records, as ``BenchRun`` summarises its own."""
        cfg = self.config
        summary = summarize(self.records, cfg.slo, open_loop=cfg.open_loop)
        steady = steady_state(self.records, None if cfg.open_loop else cfg.concurrency, cfg.ramp_excluded_s)
        summary.extra["steady"] = steady.to_dict()  # throughput without ramp-up and drain
        if self.observers is not None:  # the GPUs and the queue over that window
            self.observers.add_steady(observed, self.records, steady)
        if cfg.percentiles:  # --percentiles: each with its 95 % interval
            summary.extra["percentiles"] = asked_percentiles(self.records, cfg.percentiles)
        summary.extra.update(workloads.summary_extra(workload, self.records))
        summary.extra["silences"], silent = silence_summary(self.records)  # a server stall, any loop
        conditions["workers"] = self._describe_workers()
        dones = [link.done for link in self.links if link.done]
        stopped = [d.keepalive_stopped for d in dones if d.keepalive_stopped]
        conditions["connections"] = {
            "reuse": not cfg.new_connection_per_request,
            "reuse_stopped": stopped[0] if stopped else None,
            "tls_verify": cfg.tls_verify,
            "ca_cert": cfg.ca_cert,
        }
        hint = not_found_hint(endpoint.url, endpoint.base_path, self.records)
        warnings = (
            ([hint] if hint else [])
            + run_warnings(cfg, summary, send_rate(self.records))
            + workloads.warnings(summary.extra)
            + ([f"connections: {stopped[0]}"] if stopped else [])
            + health.warnings
            + silent
        )
        return BenchResult(
            self.run_id, conditions, self.records, summary, health, self.interrupted,
            self.stop_reason or "completed", warnings, observed,
        )  # fmt: skip

    # --- the plan ---
    def _specs(self, cfg: BenchConfig, workload: Any) -> list[WorkerSpec]:
        n = self.count
        cores = usable_cores()
        pinned = [cores[w % len(cores)] if len(cores) > 1 else None for w in range(n)]  # 1 core: no spread
        if cfg.open_loop:
            offsets = self._offsets(cfg, workload)
            caps = split_users(cfg.max_concurrency, n) if cfg.max_concurrency else None
            return [
                WorkerSpec(
                    dataclasses.replace(cfg, max_concurrency=caps[w].users) if caps else cfg,
                    self.run_id,
                    w,
                    n,
                    None,
                    dealt_offsets(offsets, w, n),
                    pinned[w],
                )
                for w in range(n)
            ]
        shares = split_users(cfg.concurrency or 1, n)
        return [WorkerSpec(cfg, self.run_id, w, n, shares[w], None, pinned[w]) for w in range(n)]

    def _offsets(self, cfg: BenchConfig, workload: Any) -> list[float]:
        """The single process's schedule, computed once here, up to the request or time bound."""
        offsets = load_shapes.open_loop_offsets(cfg, workload)
        if self.total_planned is not None:
            offsets = islice(offsets, self.total_planned)
        if cfg.duration_s is not None:
            end = cfg.duration_s
            offsets = takewhile(lambda s: s < end, offsets)
        return list(offsets)

    def planned_indices(self, worker: int) -> list[int] | None:
        """The requests a worker was dealt (None: a closed loop bounded by time only)."""
        spec = self.links[worker].spec
        if spec.offsets is not None:
            return [worker + k * self.count for k in range(len(spec.offsets))]
        if self.total_planned is None:
            return None
        users = self.config.concurrency or 1
        return [i for i in range(self.total_planned) if owner_of(i, self.count, users) == worker]

    # --- the processes ---
    async def _align_clocks(self) -> dict[str, Any]:
        """Each worker's clock against ours. A worker on this machine (same boot id) reads the same
        CLOCK_MONOTONIC: nothing to correct, and the measurement checks it. On another machine the
        measured offset moves its start time and its records onto our clock."""
        mine = clock_identity()
        workers = []
        for link in self.links:
            offset, error = await link.measure_clock()
            shared = link.clock_id == mine
            link.clock_offset_ns = 0 if shared else offset
            workers.append(
                {"worker": link.spec.worker, "same_clock": shared, "offset_ns": offset, "error_ns": error}
            )
        return {
            "method": "same machine: one CLOCK_MONOTONIC; other machines: NTP-style ping over the worker's "
            "socket (16 pings, the shortest round trip; error = half of it)",
            "workers": workers,
        }

    async def _start_workers(self, specs: list[WorkerSpec]) -> None:
        mp: Any = multiprocessing.get_context(self.start_method)
        loop = asyncio.get_running_loop()
        for spec in specs:
            parent_end, child_end = mp.Pipe()
            process = mp.Process(target=worker_main, args=(child_end, spec), daemon=True)
            process.start()
            child_end.close()
            link = WorkerLink(spec, process, parent_end, loop, self._received)
            self.links.append(link)
            loop.add_reader(parent_end.fileno(), link.on_readable)

    def _received(self, link: WorkerLink, record: RequestRecord) -> None:
        self.records.append(record)
        if self.on_record is None:
            return
        try:
            self.on_record(record)
        except Exception as exc:  # e.g. the records file's disk is full: stop, keep what we have
            self.stop(f"aborted: could not save a record ({exc})")

    async def _reap(self) -> None:
        """Every worker ended: joined, or killed when it does not exit."""
        for link in self.links:
            if not link.ended.done():
                link.tell(("stop", self.stop_reason or "aborted"))
        for link in self.links:
            await asyncio.to_thread(link.process.join, JOIN_TIMEOUT_S)
            if link.process.is_alive():
                link.process.kill()
                await asyncio.to_thread(link.process.join, JOIN_TIMEOUT_S)
            link.close()

    def _health(self, workload: Any, prefix: str, t0: int) -> Any:
        for link in self.links:
            link.note_exit()
            if link.done is None:
                planned = self.planned_indices(link.spec.worker) if not self.stop_reason else None
                for record in lost_records(self.config, link, planned, workload, prefix, t0):
                    self._received(link, record)
            elif link.done.stop_reason.startswith("aborted") and not self.stop_reason:
                self.stop_reason = f"worker {link.spec.worker}: {link.done.stop_reason}"
        lost = [link for link in self.links if link.lost]
        if lost and not self.stop_reason:
            self.stop_reason = f"aborted: worker {lost[0].spec.worker} {lost[0].lost}"
        lags = [(r.dispatched_ns - r.scheduled_ns) / 1e6 for r in self.records if r.dispatched_ns]
        report = combined_health([link.health() for link in self.links], lags)
        done = [(link, link.done.health) for link in self.links if link.done is not None]
        stalls = {link.spec.worker: own_stalls(health, -link.clock_offset_ns) for link, health in done}
        dropped = sum(health.stalls_dropped for _, health in done)
        judge_stalls(report, stalls, dropped, self.records, self.config.stall_tolerance)
        return report

    def _describe_workers(self) -> dict[str, Any]:
        return {
            "count": self.count,
            "asked": self.config.workers,
            "kind": self.kind,
            "deal": "one arrival schedule, round-robin" if self.config.open_loop else "users split evenly",
            "cores": [link.done.core if link.done else link.spec.core for link in self.links],
            "clock": self.clock,
        }


AnyRun = BenchRun | WorkerRun
