"""One worker process of a multi-process run (``app.workers``): its own event loop, connection
pool and health monitor, sending its share of the one schedule and streaming every record back.

Messages on the worker's pipe, worker -> parent: ("ready",), ("sent", record) as a request goes
out, ("record", record) when it has ended, ("done", WorkerDone) or ("failed", text) at the end.
Parent -> worker: ("start", t0_ns) with the start time shared by every worker, ("stop", reason).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import signal
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from multiprocessing.connection import Connection
from time import perf_counter_ns
from typing import Any

from tokenpace.app.bench import load_shapes
from tokenpace.app.bench.bench import build_requests, connect, connections_ahead, prebuilt
from tokenpace.app.run import workloads
from tokenpace.app.run.bench_config import BenchConfig
from tokenpace.app.run.run_context import RunContext
from tokenpace.app.run.run_loop import run_event_loop
from tokenpace.app.watch.health import HealthMonitor, HealthReport
from tokenpace.app.workers.worker_pipe import FrameReader, FrameWriter
from tokenpace.core.credentials import secrets_of
from tokenpace.core.record import RequestRecord
from tokenpace.core.schedule.split import UserShare, owner_of
from tokenpace.wire.descriptors import reserve_descriptors

PARENT_GONE = "aborted: the parent process went away"


@dataclass
class WorkerSpec:
    config: BenchConfig  # the parent's, with the model it resolved
    run_id: str  # the run's: the same prompt salt and request ids in every worker
    worker: int
    workers: int
    users: UserShare | None  # closed loop: this worker's users
    offsets: list[float] | None  # open loop: the arrival offsets of this worker's requests
    core: int | None  # pinned to this core (None: not pinned)


@dataclass
class WorkerDone:
    health: HealthReport
    stop_reason: str
    connections_opened: int
    keepalive_stopped: str | None
    core: int | None


def worker_main(conn: Connection | socket.socket, spec: WorkerSpec) -> None:
    """The process entry point (spawn/forkserver: importable, arguments pickled)."""
    with contextlib.suppress(ValueError):  # not the main thread (a Ray actor): no signals to set
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the parent, which relays a stop
    core = _pin(spec.core)
    spec = dataclasses.replace(spec, core=core)
    link = _Link(conn)
    try:
        run_event_loop(_work(link, spec))
    except BaseException as exc:  # told to the parent, which keeps every record it was sent
        with contextlib.suppress(OSError):
            link.writer.send_all(("failed", f"{type(exc).__name__}: {exc}"))
    finally:
        conn.close()


class _Link:
    """The worker's end of its socket pair to the parent."""

    def __init__(self, conn: Connection | socket.socket) -> None:
        self.conn = conn  # kept open for the fd's lifetime
        self.fd = conn.fileno()
        self.writer = FrameWriter(self.fd, None)  # the loop is set once it runs
        self.reader = FrameReader(self.fd)


def _pin(core: int | None) -> int | None:
    if core is None or not hasattr(os, "sched_setaffinity"):
        return None
    try:
        os.sched_setaffinity(0, {core})
    except OSError:  # not allowed here (a container's CPU set): run unpinned
        return None
    return core


class _WorkerContext(RunContext):
    """Tells the parent of each request as it goes out, so a request in flight when this process
    dies is still recorded (by the parent)."""

    def __init__(self, config: BenchConfig, writer: FrameWriter, warmup: int) -> None:
        super().__init__(config, self._finished, warmup=warmup)
        self.writer = writer

    def _finished(self, record: RequestRecord) -> None:
        self.writer.send(("record", record))

    async def send(self, record: RequestRecord, payload: bytes, capture: list[bytes] | None = None) -> None:
        self.writer.send(("sent", record))
        await super().send(record, payload, capture)


async def _work(link: _Link, spec: WorkerSpec) -> None:
    link.writer.loop = asyncio.get_running_loop()
    # the watchers are the parent's
    cfg = dataclasses.replace(spec.config, server_metrics="off", gpu_metrics="off", connect_probe=False)
    server = await connect(cfg, None)
    sender = server.sender
    counter = await workloads.resolve_counter(
        cfg.workload_opts, server.endpoint, server.model, server.headers
    )
    workload = workloads.build(
        cfg.workload_opts, cfg.input_len, cfg.output_len, cfg.seed, counter, cfg.salt_key(spec.run_id)
    )
    prefix = cfg.request_id_prefix if cfg.request_id_prefix is not None else f"tp-{spec.run_id}-"
    users = spec.users.users if spec.users is not None else None
    all_users = cfg.concurrency if users is not None else None

    def mine(index: int) -> bool:
        return owner_of(index, spec.workers, all_users) == spec.worker

    warmup = sum(1 for i in range(cfg.warmup) if mine(i))
    ctx = _WorkerContext(cfg, link.writer, warmup)
    ctx.sender = sender
    ctx.secrets = secrets_of(server.headers)
    share = (item for item in workload.items() if mine(item.index))
    requests = prebuilt(_tagged(build_requests(cfg, share, sender, prefix, ctx.total_planned), spec.worker))
    shape: Any
    if spec.users is not None:
        shape = load_shapes.ClosedLoop(requests, spec.users.users, spec.users.first_user)
    else:
        shape = load_shapes.OpenLoop(requests, iter(spec.offsets or []), cfg.max_concurrency)
    reserve_descriptors(connections_ahead(cfg))  # before the shared start: see wire/descriptors.py
    t0 = await _started(link, ctx)
    monitor = HealthMonitor()
    monitor.start()
    try:
        if t0 is not None and not ctx.stopping:
            await asyncio.sleep(max(0.0, (t0 - perf_counter_ns()) / 1e9))  # the shared start
            deadline = t0 + int(cfg.duration_s * 1e9) if cfg.duration_s else None
            await shape.drive(ctx, t0, deadline)
    finally:
        await monitor.stop()
        await sender.close()
    records = ctx.records
    chunks = sum(len(r.token_ns) for r in records)
    lags = [(r.dispatched_ns - r.scheduled_ns) / 1e6 for r in records if r.dispatched_ns]
    health = monitor.report(chunks, lags, cfg.open_loop)
    done = WorkerDone(
        health, ctx.stop_reason or "completed", sender.connections_opened, sender.keepalive.stopped, spec.core
    )
    link.writer.send_all(("done", done))


def _tagged(
    requests: Iterator[tuple[RequestRecord, bytes]], worker: int
) -> Iterator[tuple[RequestRecord, bytes]]:
    """Each record says which worker measured it (``record.worker``)."""
    for record, payload in requests:
        record.worker = worker
        yield record, payload


def clock_identity() -> str:
    """Processes with the same boot id read one CLOCK_MONOTONIC (perf_counter_ns on Linux)."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        return f"{socket.gethostname()}:unknown-boot"


async def _started(link: _Link, ctx: RunContext) -> int | None:
    """Say ready, then wait for the shared start time; afterwards the parent's messages stop the run."""
    loop = asyncio.get_running_loop()
    start: asyncio.Future[int | None] = loop.create_future()

    def on_readable() -> None:
        messages = link.reader.read()
        if messages is None:  # the parent is gone: stop, nobody would keep the records
            loop.remove_reader(link.fd)
            ctx.stop(PARENT_GONE)
            messages = [("stop", PARENT_GONE)]
        for kind, value in messages:
            if kind == "ping":  # the parent measures how this process's clock sits against its own
                link.writer.send(("pong", (value, perf_counter_ns())))
            elif kind == "start" and not start.done():
                start.set_result(value)
            elif kind == "stop":
                ctx.stop(value)
                if not start.done():
                    start.set_result(None)

    loop.add_reader(link.fd, on_readable)
    link.writer.send(("ready", clock_identity()))
    return await start
