"""Start and stop a gateway on a TCP address (used by the CLI and by tests).

Stopping drains: from SIGTERM, /tokenpace/ready answers 503 with the reason (``draining: N requests
in flight``) and /tokenpace/live 200 while the requests in flight finish (at most half of
``--shutdown-timeout``); the admin pages stay up meanwhile. With the admin pages apart, the proxy's
port closes at once; on one port, it stays open for them and a new proxied request is refused 503
(``draining``, the connection closed)."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from collections.abc import Callable

from aiohttp import web

from tokenpace.core.record import RequestRecord
from tokenpace.gateway.config.config import GatewayConfig, admin_url, proxy_url
from tokenpace.gateway.lifecycle.fleet_sync import Follow
from tokenpace.gateway.lifecycle.reload import probe_upstreams
from tokenpace.gateway.operations.guard import listen
from tokenpace.gateway.recording.sink import BatchWriter, fan_out, jsonl_writer
from tokenpace.gateway.recording.spool_thread import SpoolThread
from tokenpace.gateway.request_path.proxy import Gateway

DRAIN_POLL_S = 0.05  # how often a stopping gateway looks whether its requests finished
# What aiohttp's cleanup still gives a handler after the drain (one answering the last bytes, one
# past the drain's bound); the drain itself is the wait.
AFTER_DRAIN_S = 1.0
# How long the loop waits for the GIL while another thread of ours holds it (the interpreter's switch
# interval, 5 ms by default): /metrics renders in a thread (pure Python, ~110 ms with every model
# slot filled), and each loop wake-up during a render would otherwise wait up to 5 ms.
GIL_SWITCH_S = 0.0005


class RunningGateway:
    """``async with RunningGateway(config) as gw:`` then send requests to ``gw.url``."""

    def __init__(
        self,
        config: GatewayConfig,
        writer: BatchWriter | None = None,
        on_record: Callable[[RequestRecord], None] | None = None,
        worker: int | None = None,
        load: Callable[[], GatewayConfig] | None = None,
        say: Callable[[str], None] | None = None,
        follow: Follow | None = None,
        spool: SpoolThread | None = None,
    ) -> None:
        if config.records_path and worker is None:  # the JSONL file as well as any other writer
            writer = fan_out(writer, jsonl_writer(config.records_path))
        self.gateway = Gateway(config, writer=writer, on_record=on_record, worker=worker or 0)
        self.spool = spool  # --spool: records on disk until stored; the last process's stored first
        self.worker = worker  # one of --workers: shares the port; the parent serves the admin pages
        self.config = config
        self.port = config.port
        self.admin_port = config.admin_port
        self._runner: web.AppRunner | None = None
        self._admin_runner: web.AppRunner | None = None
        self._listeners: list[asyncio.AbstractServer] = []
        self.follow = follow or Follow()  # the file watched, the fleet's store (fleet_sync.py)
        if self.follow.link is not None:  # every /metrics sample names the fleet
            self.gateway.admin.fleet_labels = {"gateway_fleet": self.follow.link.fleet}
        self.reloader = self.follow.reloader(self.gateway, load, say)  # SIGHUP, POST /tokenpace/config
        self.gateway.control.changer = self.reloader
        self.gateway.control.readiness.in_flight = self._in_flight
        self._probe: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        return proxy_url(self.config, self.port)

    @property
    def admin_url(self) -> str:
        """Where /metrics and /tokenpace/* are served (the proxy's own URL unless apart)."""
        return admin_url(self.config, self.port, self.admin_port)

    async def start(self) -> RunningGateway:
        await self.follow.begin(self.reloader)  # a fleet's replica runs the fleet's config from the start
        if self.spool is not None:  # spooled again as they are queued, then the old files go
            leftovers, self.gateway.sink.spool = self.spool.leftovers(), self.spool
            for record in leftovers:
                self.gateway.sink.put(record)
            self.spool.discard_leftovers()
        cfg, gw = self.gateway.config, self.gateway
        gw.control.readiness.waiting = {u.name for u in cfg.upstreams if u.weight > 0}
        self._probe = asyncio.get_running_loop().create_task(probe_upstreams(gw))
        # handler_cancellation: a client that goes away cancels its handler, which cancels the
        # upstream request at once instead of at the next write. aiohttp's own keep-alive timer
        # is only a backstop behind the guard's idle and header timeouts.
        backstop = cfg.idle_timeout_s + cfg.header_timeout_s + 1.0
        # At stop, open requests get half the shutdown timeout, the records' writer what is left.
        # auto_decompress off: a compressed request body is never inflated by aiohttp (before
        # --max-body could apply); it is forwarded as sent, or refused at once where it must be read.
        self._runner = web.AppRunner(
            gw.app,
            auto_decompress=False,
            handler_cancellation=True,
            access_log=None,
            keepalive_timeout=backstop,
            shutdown_timeout=min(AFTER_DRAIN_S, cfg.shutdown_timeout_s / 2),
        )
        await self._runner.setup()
        reuse = self.worker is not None
        self._listeners.append(await listen(self._runner, gw.guard, cfg.host, cfg.port, reuse))
        self.port = _bound_port(self._listeners[-1])
        if gw.admin_app is not None and cfg.admin_port is not None and not self.worker:  # worker 0 serves it
            self._admin_runner = web.AppRunner(gw.admin_app, access_log=None, keepalive_timeout=backstop)
            await self._admin_runner.setup()
            host = cfg.admin_host or cfg.host
            self._listeners.append(await listen(self._admin_runner, gw.admin_guard, host, cfg.admin_port))
            self.admin_port = _bound_port(self._listeners[-1])
        return self

    async def stop(self) -> None:
        gw, loop = self.gateway, asyncio.get_running_loop()
        gw.control.readiness.draining = True  # /tokenpace/ready: 503 with the reason from now on
        if self._probe is not None:
            self._probe.cancel()
        await self.reloader.close()
        gw.stop_deadline = loop.time() + self.config.shutdown_timeout_s
        if len(self._listeners) > 1:  # the admin pages apart: the proxy's port takes no one new
            self._listeners.pop(0).close()
        drained = loop.time() + self.config.shutdown_timeout_s / 2
        while self._in_flight() > 0 and loop.time() < drained:
            await asyncio.sleep(DRAIN_POLL_S)
        for listener in self._listeners:
            listener.close()  # no new connections; open ones are closed by the runners' cleanup
        self._listeners.clear()
        for runner in (self._runner, self._admin_runner):
            if runner is not None:
                await runner.cleanup()
        self._runner = self._admin_runner = None

    def _in_flight(self) -> int:
        value: float = self.gateway.metrics.in_flight._value.get()  # the gauge's own count
        return max(0, round(value))

    async def __aenter__(self) -> RunningGateway:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


async def serve_forever(
    config: GatewayConfig,
    ready: Callable[[RunningGateway], None] | None = None,
    writer: BatchWriter | None = None,
    done: Callable[[RunningGateway], None] | None = None,
    worker: int | None = None,
    load: Callable[[], GatewayConfig] | None = None,
    say: Callable[[str], None] | None = None,
    follow: Follow | None = None,
    spool: SpoolThread | None = None,
) -> None:
    """Serve until cancelled; ``done`` runs after the queued records are flushed. SIGHUP re-reads
    the configuration file through ``load`` (reload.py), ``say`` logs what it did. A serving
    process: sets the interpreter's switch interval (``GIL_SWITCH_S``)."""
    sys.setswitchinterval(GIL_SWITCH_S)
    gw = RunningGateway(config, writer=writer, worker=worker, load=load, say=say, follow=follow, spool=spool)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):  # stop cleanly: queued records are flushed
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, stop.set)
    if worker is None:  # with --workers the parent owns the signals
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(signal.SIGHUP, gw.reloader.spawn, "SIGHUP")
    try:
        async with gw:
            if ready is not None:
                ready(gw)
            await stop.wait()
    finally:
        if done is not None:
            done(gw)


def _bound_port(listener: asyncio.AbstractServer) -> int:
    """The port actually bound (when 0 was asked for)."""
    port: int = listener.sockets[0].getsockname()[1]  # type: ignore[attr-defined]
    return port
