"""Load shapes: when each request goes out. A run builds its requests, picks one shape from its
config (``choose``) and calls ``drive``; a shape touches the run only through ``RunContext``.

- closed loop: N users, each sends its next request when its last one finished;
- open loop: arrivals on their own clock (an arrival process), whatever the server does;
- trace replay: an open loop on the trace's own clock;
- sessions (``app.sessions``): multi-turn chats, closed or open loop.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from time import perf_counter_ns
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from tokenpace.core.record import RequestRecord
from tokenpace.core.schedule.arrivals import arrival_offsets_s
from tokenpace.core.schedule.ramp import ramp_offsets_s, user_start_offsets_s
from tokenpace.core.workload.sessions import SessionWorkload

if TYPE_CHECKING:
    from tokenpace.app.run.bench_config import BenchConfig
    from tokenpace.app.run.run_context import RunContext
    from tokenpace.client import Sender

# Records and their prepared bytes, in send order (built ahead of their send time).
Requests = Iterator[tuple[RequestRecord, bytes]]


class LoadShape(Protocol):
    async def drive(self, ctx: RunContext, t0: int, deadline_ns: int | None) -> None:
        """Send until the requests run out, the deadline passes or the run stops."""
        ...


class ClosedLoop:
    def __init__(
        self, requests: Requests, users: int, first_user: int = 0, joins_s: list[float] | None = None
    ) -> None:
        self.requests = requests
        self.users = users
        self.first_user = first_user  # a worker process's users are numbered after the others'
        self.joins_s = joins_s  # a user ramp: when each user starts (s after t0); None: all at once

    async def drive(self, ctx: RunContext, t0: int, deadline_ns: int | None) -> None:
        items = self.requests
        send = ctx.send  # bound once per run, not per request

        async def user(worker: int) -> None:
            try:
                if self.joins_s:  # a ramp of users: this one joins later
                    await asyncio.sleep(
                        max(0.0, t0 / 1e9 + self.joins_s[worker - first] - perf_counter_ns() / 1e9)
                    )
                for record, payload in items:
                    if not (record.warmup or ctx.warm):
                        await ctx.warmed_up()  # measure warm, not alongside the warm-up
                    now = perf_counter_ns()
                    if ctx.stopping or (deadline_ns is not None and now >= deadline_ns):
                        return
                    record.worker = worker
                    record.scheduled_ns = record.dispatched_ns = now
                    await send(record, payload)
            except Exception as exc:
                ctx.client_failed(exc)

        first = self.first_user
        tasks = [asyncio.ensure_future(user(first + w)) for w in range(self.users)]
        for task in tasks:
            ctx.track(task)
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*tasks, return_exceptions=True)


class OpenLoop:
    """Each request at t0 + its offset (s); ``max_concurrency`` queues requests beyond the cap."""

    def __init__(self, requests: Requests, offsets: Iterator[float], max_concurrency: int | None) -> None:
        self.requests = requests
        self.offsets = offsets
        self.max_concurrency = max_concurrency

    async def drive(self, ctx: RunContext, t0: int, deadline_ns: int | None) -> None:
        cap = asyncio.Semaphore(self.max_concurrency) if self.max_concurrency else None
        loop = asyncio.get_running_loop()

        async def capped(record: RequestRecord, payload: bytes) -> None:
            try:
                if cap is None:
                    await ctx.send(record, payload)
                    return
                async with cap:
                    if deadline_ns is not None and perf_counter_ns() >= deadline_ns:
                        ctx.not_sent(record, "still queued for the concurrency cap when --duration ended")
                        return
                    await ctx.send(record, payload)
            except asyncio.CancelledError:
                if not record.sent_ns:  # cancelled while queued for the cap: never sent
                    ctx.not_sent(record, "cancelled while queued for the concurrency cap")
                raise
            except Exception as exc:
                ctx.client_failed(exc)

        async def dispatch() -> None:
            for (record, payload), offset in zip(self.requests, self.offsets):  # noqa: B905 (both endless)
                scheduled = t0 + int(offset * 1e9)
                if ctx.stopping or (deadline_ns is not None and scheduled >= deadline_ns):
                    return
                delay = (scheduled - perf_counter_ns()) / 1e9
                if delay > 0:
                    await asyncio.sleep(delay)
                if ctx.stopping:
                    return
                record.scheduled_ns = scheduled
                record.dispatched_ns = perf_counter_ns()
                ctx.track(loop.create_task(capped(record, payload)))

        dispatcher = loop.create_task(dispatch())
        ctx.track(dispatcher)  # stop() cancels it with the requests in flight
        with contextlib.suppress(asyncio.CancelledError):
            await dispatcher
        await ctx.drain()


def choose(config: BenchConfig, workload: Any, requests: Requests, sender: Sender, prefix: str) -> LoadShape:
    """The load shape the config and the workload ask for."""
    if isinstance(workload, SessionWorkload):
        from tokenpace.app.bench.sessions import Sessions

        return Sessions(config, workload, sender, prefix)
    if config.open_loop:
        return OpenLoop(requests, open_loop_offsets(config, workload), config.max_concurrency)
    users = config.concurrency or 1
    joins = user_start_offsets_s(config.ramp, users) if config.ramp is not None else None
    return ClosedLoop(requests, users, joins_s=joins)


def open_loop_offsets(config: BenchConfig, workload: Any) -> Iterator[float]:
    """When each request goes out (s from the start): the trace's own clock, else the seeded
    arrival process. One function, so that worker processes share the single process's schedule."""
    if getattr(workload, "offsets", None) is not None:
        offsets: Iterator[float] = workload.offsets()
        return offsets
    rng = np.random.default_rng(config.seed + 1)
    if config.ramp is not None and config.ramp.of_rate:
        total = (config.requests or 0) + config.warmup
        return ramp_offsets_s(config.ramp, total, rng, config.burstiness)
    return arrival_offsets_s(config.rate or 1.0, config.arrival, rng, config.burstiness)
