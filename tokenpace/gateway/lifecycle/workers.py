"""``--workers N``: N gateway processes on one port, so a host with more cores carries more streams.

- Each worker is a whole gateway (proxy, guard, meter) with its own event loop; all listen on the
  same port with SO_REUSEPORT and the kernel spreads new connections over them.
- Metrics: prometheus_client's multiprocess mode. ``PROMETHEUS_MULTIPROC_DIR`` is set before the
  workers start (spawned, so they import prometheus_client afresh); each writes its series to files
  there and ``/metrics``, on whichever worker answers, sums them (gauges: over live workers).
- Records: each worker sends its finished batches over a queue to this parent process, which alone
  writes the store and the JSONL file: one run per session and upstream, as with one process.
  ``record.worker`` says which worker measured it; all share the monotonic clock.
- Worker 0 serves the admin address when ``--admin-listen`` gives one.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import queue
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Coroutine
from dataclasses import replace
from typing import Any

from tokenpace.gateway.config.config import GatewayConfig, admin_url, proxy_url
from tokenpace.gateway.operations.admin import MULTIPROC_ENV
from tokenpace.gateway.recording.sink import BatchWriter, fan_out, jsonl_writer, records_in

# Runs a coroutine on a fresh event loop to its end: asyncio.run, or the app's run_event_loop (uvloop)
LoopRunner = Callable[[Coroutine[Any, Any, None]], None]
START_TIMEOUT_S = 60.0
STOP_MARGIN_S = 5.0  # past each worker's own --shutdown-timeout, before it is killed


class WorkerPool:
    """``async with WorkerPool(config, writer) as pool:`` then send requests to ``pool.url``."""

    def __init__(
        self, config: GatewayConfig, writer: BatchWriter | None = None, run: LoopRunner = asyncio.run
    ) -> None:
        if config.records_path:
            writer = fan_out(writer, jsonl_writer(config.records_path))
        self.config = config
        self.writer = writer
        self.run = run  # how each worker runs its event loop: the app's choice (uvloop or not)
        self.port = config.port
        self.admin_port = config.admin_port
        self.written = 0
        self.dropped = 0
        self._dir: str | None = None
        self._held: socket.socket | None = None
        self._procs: list[multiprocessing.process.BaseProcess] = []
        self._queue: multiprocessing.queues.Queue[Any] | None = None
        self._ready: queue.Queue[Any] = queue.Queue()
        self._drain: threading.Thread | None = None

    @property
    def url(self) -> str:
        return proxy_url(self.config, self.port)

    @property
    def admin_url(self) -> str:
        """Where /metrics and /tokenpace/* are served (the proxy's own URL unless apart)."""
        return admin_url(self.config, self.port, self.admin_port)

    async def start(self) -> WorkerPool:
        await asyncio.get_running_loop().run_in_executor(None, self._start)
        return self

    async def stop(self) -> None:
        await asyncio.get_running_loop().run_in_executor(None, self._stop)

    async def __aenter__(self) -> WorkerPool:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # --- in a thread: blocking process management ---
    def _start(self) -> None:
        self._dir = tempfile.mkdtemp(prefix="tokenpace-gw-metrics-")
        os.environ[MULTIPROC_ENV] = self._dir  # inherited by the workers; read by /metrics
        if self.port == 0:  # one port for all: take one now and hold it (bound, not listening)
            self._held = socket.socket()
            self._held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            self._held.bind((self.config.host, 0))
            self.port = self._held.getsockname()[1]
        config = replace(self.config, port=self.port)
        ctx = multiprocessing.get_context("spawn")
        self._queue = ctx.Queue()
        self._drain = threading.Thread(target=self._collect, name="tokenpace-gw-records", daemon=True)
        self._drain.start()
        for i in range(self.config.workers):
            args = (config, i, self._queue, os.getpid(), self.run)
            proc = ctx.Process(target=_worker_main, args=args, name=f"tokenpace-gw-{i}")
            proc.start()
            self._procs.append(proc)
        deadline = time.monotonic() + START_TIMEOUT_S
        for _ in self._procs:
            while True:
                dead = [p for p in self._procs if p.exitcode is not None]
                if dead or time.monotonic() > deadline:
                    self._stop()
                    raise RuntimeError("a gateway worker did not start (is the port in use?)")
                with contextlib.suppress(queue.Empty):
                    _, index, _port, admin_port = self._ready.get(timeout=0.1)
                    if index == 0 and self.config.admin_port is not None:
                        self.admin_port = admin_port
                    break

    def _collect(self) -> None:
        """Records from every worker to the one writer (this thread only)."""
        assert self._queue is not None
        while True:
            msg = self._queue.get()
            if msg is None:
                return
            if msg[0] == "ready":
                self._ready.put(msg)
                continue
            batch = msg[1]
            if self.writer is None:
                continue
            try:
                self.writer(batch)
                self.written += len(records_in(batch))
            except Exception:  # the store failed this batch: counted, traffic goes on
                self.dropped += len(batch)

    def _stop(self) -> None:
        for proc in self._procs:
            if proc.exitcode is None:
                proc.terminate()  # SIGTERM: the worker stops and flushes its records to us
        deadline = time.monotonic() + self.config.shutdown_timeout_s + STOP_MARGIN_S
        for proc in self._procs:
            proc.join(max(0.0, deadline - time.monotonic()))
            if proc.exitcode is None:
                proc.kill()
                proc.join()
        self._procs.clear()
        if self._queue is not None:
            self._queue.put(None)
            if self._drain is not None:  # a writer hung (a dead disk) is left to its daemon thread
                self._drain.join(self.config.shutdown_timeout_s)
            self._queue.close()
            self._queue = None
        if self._held is not None:
            self._held.close()
            self._held = None
        if self._dir is not None:
            os.environ.pop(MULTIPROC_ENV, None)
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None


def _worker_main(
    config: GatewayConfig, index: int, out: multiprocessing.queues.Queue[Any], parent: int, run: LoopRunner
) -> None:
    from tokenpace.gateway.lifecycle.serve import RunningGateway, serve_forever

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the group: the parent decides
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    threading.Thread(target=_orphan_watch, args=(parent,), daemon=True).start()

    def send(batch: list[Any]) -> None:
        out.put(("records", batch))

    def ready(gw: RunningGateway) -> None:
        out.put(("ready", index, gw.port, gw.admin_port))

    run(serve_forever(config, ready, writer=send, worker=index))


def _no_reload() -> None:
    print("SIGHUP: a live change with --workers > 1 is not supported yet: restart", file=sys.stderr)


def _orphan_watch(parent: int) -> None:
    """A worker whose parent died (killed outright) stops too, instead of serving on for ever."""
    while os.getppid() == parent:
        time.sleep(1.0)
    os.kill(os.getpid(), signal.SIGTERM)


async def serve_workers(
    config: GatewayConfig,
    ready: Callable[[WorkerPool], None] | None = None,
    writer: BatchWriter | None = None,
    done: Callable[[WorkerPool], None] | None = None,
    run: LoopRunner = asyncio.run,
) -> None:
    """Serve with ``config.workers`` processes until SIGTERM/SIGINT; ``done`` runs after every
    worker's records were written."""
    pool = WorkerPool(config, writer, run)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, stop.set)
    with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):  # not a kill: refused
        loop.add_signal_handler(signal.SIGHUP, _no_reload)
    try:
        async with pool:
            if ready is not None:
                ready(pool)
            await stop.wait()
    finally:
        if done is not None:
            done(pool)
