"""Virtual clock only: run consecutive decode-only steps in one go (the engine's `fast_forward`).

Valid while nothing can change the batch: no request can be admitted (none waits, or the batch is at
max_num_seqs), every running one decodes, no block shortage, and no arrival (`horizon`) before a step
ends. Stops at the first finish, so the result is exactly what step-by-step scheduling would give, at
O(steps + batch) instead of O(steps x batch) -- or, with lazy decoders (lazy_decode.py), at
O(steps + requests with an event in the skipped steps). A mixin of `Engine` (engine.py), which owns
the state it declares.
"""

from __future__ import annotations

import heapq
from collections import deque
from operator import attrgetter

from tokenpace.sim.model.costmodel import CostModel, StepWork
from tokenpace.sim.model.kvcache import KVCache
from tokenpace.sim.model.lazy_decode import LazyDecoders
from tokenpace.sim.model.request import FINISHED, RUNNING, SimRequest

_SEQ = attrgetter("seq")  # running (admission) order


class FastForward:
    running: list[SimRequest]
    waiting: deque[SimRequest]
    max_num_seqs: int
    block_size: int
    kv: KVCache
    cost: CostModel
    _lazy: LazyDecoders | None
    _aborted_running: int

    def _release(self, req: SimRequest, state: str) -> None:
        raise NotImplementedError  # the engine's

    def fast_forward(self, now: float, horizon: float) -> tuple[float, list[SimRequest]]:
        """Returns (end time, requests finished); (now, []) when it does not apply."""
        lazy = self._lazy
        if lazy is None:
            return self._ff_exact(now, horizon)
        run = self.running
        if (self.waiting and len(run) < self.max_num_seqs) or not run:
            return now, []
        if lazy.count == len(run):
            return self._ff_lazy(lazy, now, horizon)
        if any(r.lz < 0 and r.num_computed != r.prompt_len + r.generated - 1 for r in reversed(run)):
            return now, []
        # Unusual (a request one token short of its prompt's end counts as decoding): the exact version.
        return self._ff_materialized(lazy, now, horizon)

    def _ff_materialized(
        self, lazy: LazyDecoders, now: float, horizon: float
    ) -> tuple[float, list[SimRequest]]:
        lazy.materialize_all(self.running)
        t, done = self._ff_exact(now, horizon)
        lazy.add_decoders(self.running)
        return t, done

    def _decode_steps(self, now: float, horizon: float, k: int, b: int, ctx: int) -> tuple[float, int]:
        """Up to k decode steps of a batch of b with total context ctx, stopping at `horizon`."""
        if b >= self.max_num_seqs:
            horizon = float("inf")  # arrivals could only join the queue: they change nothing here
        work = StepWork(decode_seqs=b, seqs=b)
        t, j = now, 0
        while j < k and t < horizon:
            work.decode_context = ctx + j * b
            t += self.cost.step_seconds(work)
            j += 1
        return t, j

    def _ff_exact(self, now: float, horizon: float) -> tuple[float, list[SimRequest]]:
        run = self.running
        if (
            (self.waiting and len(run) < self.max_num_seqs)
            or len(run) == 0
            # Newest first: a request still prefilling is most likely at the end of the batch.
            or any(r.num_computed != r.prompt_len + r.generated - 1 for r in reversed(run))
            or (self._aborted_running and any(r.aborted for r in run))
        ):
            return now, []
        k = min(r.target_len - r.generated for r in run)
        kv = self.kv
        while k > 1 and sum(kv.blocks_for(r.num_computed + k) - len(r.blocks) for r in run) > kv.num_free:
            k //= 2
        if k < 2:
            return now, []
        t, j = self._decode_steps(now, horizon, k, len(run), sum(r.num_tokens for r in run))
        done: list[SimRequest] = []
        for r in run:
            self._ff_advance(r, j, t, done)
        if done:
            self.running = [r for r in run if r.state == RUNNING]
        return t, done

    def _ff_advance(self, r: SimRequest, j: int, t: float, done: list[SimRequest]) -> None:
        """r decodes j tokens ending at t: its blocks first, then a finish releases them."""
        kv = self.kv
        extra = kv.blocks_for(r.num_computed + j) - len(r.blocks)
        if extra > 0:
            r.blocks += kv.allocate(extra)
        r.num_computed += j
        r.generated += j
        r.last_token_t = t
        if r.generated >= r.target_len:
            r.finish_t = t
            self._release(r, FINISHED)
            done.append(r)

    def _ff_lazy(self, lazy: LazyDecoders, now: float, horizon: float) -> tuple[float, list[SimRequest]]:
        """Every running request is a lazy decoder: only those with an event in the skipped steps are
        touched, in running order, exactly as `_ff_exact` would touch them."""
        run = self.running
        k = lazy.min_finish() - lazy.tick + 1  # the fewest tokens any running request has left
        if k < 2:
            return now, []
        b = len(run)
        bs = self.block_size
        # Each request needs at most ceil(k / block) new blocks in k steps: if even that fits, k stands.
        if b * -(-k // bs) > self.kv.num_free:
            return self._ff_materialized(lazy, now, horizon)
        t, j = self._decode_steps(now, horizon, k, b, lazy.context())
        last = (
            lazy.tick + j - 1
        )  # a request needs a block or finishes within the j steps iff its event <= last
        touched: list[SimRequest] = []
        events = lazy.events
        while events and events[0][0] <= last:
            r = heapq.heappop(events)[2]
            lazy.materialize(r)
            touched.append(r)
        if len(touched) > 1:
            touched.sort(key=_SEQ)
        done: list[SimRequest] = []
        for r in touched:
            self._ff_advance(r, j, t, done)
        lazy.tick += j
        lazy.tick_end = t
        lazy.add_decoders(touched)
        if done:
            self.running = [r for r in run if r.state == RUNNING]
        return t, done
