"""--connect-probe: a TCP connect to the endpoint every interval, to read the network round trip
beside the run's latencies (a TCP handshake takes one round trip)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from time import perf_counter_ns
from typing import Any

from tokenpace.core.stats import describe


class ConnectProbe:
    def __init__(self, host: str, port: int, interval_s: float = 1.0) -> None:
        self.host, self.port, self.interval_s = host, port, interval_s
        self.samples: list[tuple[int, int | None]] = []  # (when, round trip ns or None on failure)
        self._task: asyncio.Task[Any] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        address = None
        while True:
            start = perf_counter_ns()
            try:
                if address is None:  # resolved once it works: DNS is not the round trip
                    infos = await loop.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM)
                    address = infos[0]
                family, type_, proto, _, addr = address
                start = perf_counter_ns()
                with socket.socket(family, type_, proto) as sock:
                    sock.setblocking(False)
                    await asyncio.wait_for(loop.sock_connect(sock, addr), timeout=5)
                self.samples.append((start, perf_counter_ns() - start))
            except (OSError, asyncio.TimeoutError):  # a failed probe is a sample, never a crash
                self.samples.append((start, None))
            await asyncio.sleep(self.interval_s)

    def summary(self, start_ns: int) -> dict[str, Any]:
        rtts = [rtt / 1e6 for _, rtt in self.samples if rtt is not None]
        return {
            "target": f"{self.host}:{self.port}",
            "interval_s": self.interval_s,
            "probes": len(self.samples),
            "failures": sum(1 for _, rtt in self.samples if rtt is None),
            "rtt_ms": describe(rtts, with_ci=False).to_dict(),
            "series": [[(t - start_ns) / 1e9, None if rtt is None else rtt / 1e6] for t, rtt in self.samples],
        }
