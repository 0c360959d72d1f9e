"""Load shape: multi-turn sessions. Each turn carries the chat so far, the assistant's answers
included (kept from the stream of session requests only, decoded after the request ended), and
waits the think time after the previous answer.

Closed loop: ``--concurrency`` users, each running one session after another. Open loop: sessions
start at ``--rate`` per second (the arrival process), ``--max-concurrency`` caps sessions at once.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from itertools import count
from time import perf_counter_ns
from typing import TYPE_CHECKING

import numpy as np

from tokenpace.app.run.answers import answer_text
from tokenpace.app.watch.client_traces import start_trace
from tokenpace.core.record import RequestRecord, Status
from tokenpace.core.schedule.arrivals import arrival_offsets_s
from tokenpace.core.workload import WorkItem
from tokenpace.core.workload.sessions import SessionWorkload, history_messages

if TYPE_CHECKING:
    from tokenpace.app.run.bench_config import BenchConfig
    from tokenpace.app.run.run_context import RunContext
    from tokenpace.client import Sender


class Sessions:
    """The sessions load shape: closed loop (users each running one session after another) or open
    loop (sessions start on the arrival clock), as the config says."""

    def __init__(self, config: BenchConfig, workload: SessionWorkload, sender: Sender, prefix: str) -> None:
        self.config = config
        self.sender = sender
        self.prefix = prefix
        self.indexes = count()
        self.sent = 0
        self.think_ns = int(workload.think_time_s * 1e9)
        self.sessions: Iterator[tuple[int, list[WorkItem]]] = enumerate(workload.sessions())
        self.total_planned = (config.requests + config.warmup) if config.requests else None

    async def drive(self, ctx: RunContext, t0: int, deadline_ns: int | None) -> None:
        if self.config.open_loop:
            await self.open_loop(ctx, t0, deadline_ns)
        else:
            await self.closed_loop(ctx, deadline_ns)

    def _full(self) -> bool:
        total = self.total_planned
        return total is not None and self.sent >= total

    async def session(
        self,
        ctx: RunContext,
        sid: int,
        turns: list[WorkItem],
        worker: int,
        scheduled_ns: int,
        deadline_ns: int | None,
    ) -> bool:
        """Send one session's turns; False when the run is over."""
        cfg = self.config
        history: list[dict[str, str]] = []
        history_tokens = 0
        due = scheduled_ns
        for k, item in enumerate(turns):
            delay = (due - perf_counter_ns()) / 1e9
            if delay > 0:
                await asyncio.sleep(delay)
            if ctx.stopping or (deadline_ns is not None and perf_counter_ns() >= deadline_ns) or self._full():
                return False
            index = next(self.indexes)
            self.sent += 1
            rid = f"{self.prefix}{index}"
            messages = history_messages(history, item)
            record = RequestRecord(
                request_id=rid,
                index=index,
                worker=worker,
                warmup=index < cfg.warmup,
                labels=cfg.labels,
                prompt_tokens_requested=history_tokens + item.input_tokens,
                output_tokens_requested=item.output_tokens,
                session=sid,
                turn=k,
                prefix_id=item.prefix_id,
                prefix_cold=item.prefix_cold,
            )
            # each turn its own trace, as every request (docs/tracing.md)
            traceparent = start_trace(record, cfg.seed, cfg.otlp_sample) if cfg.otlp_endpoint else None
            payload = self.sender.prepare(item.prompt, item.output_tokens, rid, messages, traceparent)
            record.scheduled_ns = due
            record.dispatched_ns = perf_counter_ns()
            capture: list[bytes] = []
            await ctx.send(record, payload, capture)
            if record.status is not Status.OK:
                return True  # this session ends; the user starts a new one
            history = [*messages, {"role": "assistant", "content": answer_text(capture)}]
            history_tokens = record.prompt_tokens_requested + record.output_tokens  # type: ignore[operator]
            due = perf_counter_ns() + self.think_ns
        return True

    async def closed_loop(self, ctx: RunContext, deadline_ns: int | None) -> None:
        async def user(worker: int) -> None:
            for sid, turns in self.sessions:
                if not await self.session(ctx, sid, turns, worker, perf_counter_ns(), deadline_ns):
                    return

        tasks = [asyncio.ensure_future(user(w)) for w in range(self.config.concurrency or 1)]
        for task in tasks:
            ctx.track(task)
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*tasks, return_exceptions=True)

    async def open_loop(self, ctx: RunContext, t0: int, deadline_ns: int | None) -> None:
        cfg = self.config
        rng = np.random.default_rng(cfg.seed + 1)
        offsets = arrival_offsets_s(cfg.rate or 1.0, cfg.arrival, rng, cfg.burstiness)
        cap = asyncio.Semaphore(cfg.max_concurrency) if cfg.max_concurrency else None
        loop = asyncio.get_running_loop()

        async def capped(sid: int, turns: list[WorkItem], scheduled: int) -> None:
            if cap is None:
                await self.session(ctx, sid, turns, sid, scheduled, deadline_ns)
                return
            async with cap:
                await self.session(ctx, sid, turns, sid, max(scheduled, perf_counter_ns()), deadline_ns)

        async def dispatch() -> None:
            for (sid, turns), offset in zip(self.sessions, offsets):  # noqa: B905 (offsets endless)
                scheduled = t0 + int(offset * 1e9)
                if (deadline_ns is not None and scheduled >= deadline_ns) or self._full():
                    return
                delay = (scheduled - perf_counter_ns()) / 1e9
                if delay > 0:
                    await asyncio.sleep(delay)
                if self._full() or ctx.stopping:
                    return
                ctx.track(loop.create_task(capped(sid, turns, scheduled)))

        dispatcher = loop.create_task(dispatch())
        ctx.track(dispatcher)
        with contextlib.suppress(asyncio.CancelledError):
            await dispatcher
        await ctx.drain()
