"""Start and stop a gateway on a TCP address (used by the CLI and by tests)."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Callable

from aiohttp import web

from tokenpace.core.record import RequestRecord
from tokenpace.gateway.config import GatewayConfig
from tokenpace.gateway.proxy import Gateway
from tokenpace.gateway.sink import BatchWriter, fan_out, jsonl_writer


class RunningGateway:
    """``async with RunningGateway(config) as gw:`` then send requests to ``gw.url``."""

    def __init__(
        self,
        config: GatewayConfig,
        writer: BatchWriter | None = None,
        on_record: Callable[[RequestRecord], None] | None = None,
    ) -> None:
        if config.records_path:  # the JSONL file as well as any other writer
            writer = fan_out(writer, jsonl_writer(config.records_path))
        self.gateway = Gateway(config, writer=writer, on_record=on_record)
        self.config = config
        self.port = config.port
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://{self.config.host}:{self.port}"

    async def start(self) -> RunningGateway:
        # handler_cancellation: a client that goes away cancels its handler, which cancels the
        # upstream request at once instead of at the next write.
        self._runner = web.AppRunner(self.gateway.app, handler_cancellation=True, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.config.host, self.config.port, backlog=1024)
        await site.start()
        server = site._server  # the bound port when 0 was asked for
        sockets = getattr(server, "sockets", None)
        if sockets:
            self.port = sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> RunningGateway:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


async def serve_forever(
    config: GatewayConfig,
    ready: Callable[[RunningGateway], None] | None = None,
    writer: BatchWriter | None = None,
    done: Callable[[RunningGateway], None] | None = None,
) -> None:
    """Serve until cancelled; ``done`` runs after the queued records are flushed."""
    gw = RunningGateway(config, writer=writer)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):  # stop cleanly: queued records are flushed
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, stop.set)
    try:
        async with gw:
            if ready is not None:
                ready(gw)
            await stop.wait()
    finally:
        if done is not None:
            done(gw)
