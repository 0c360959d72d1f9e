"""Virtual clock only: run consecutive decode-only steps in one go.

Valid while nothing can change the batch: no request can be admitted (none waits, or the batch is at
max_num_seqs), every running one decodes, no block shortage, and no arrival (`horizon`) before a step
ends. Stops at the first finish, so the result is exactly what step-by-step scheduling would give, at
O(steps + batch) instead of O(steps x batch) -- or, with lazy decoders (lazy_decode.py), at
O(steps + requests with an event in the skipped steps).
"""

from __future__ import annotations

import heapq
from typing import TYPE_CHECKING

from tokenpace.sim.costmodel import StepWork
from tokenpace.sim.lazy_decode import LazyDecoders

if TYPE_CHECKING:
    from tokenpace.sim.engine import Engine, SimRequest

FINISHED, RUNNING = "finished", "running"  # as engine.py's states (a cycle-free import)


def fast_forward(eng: Engine, now: float, horizon: float) -> tuple[float, list[SimRequest]]:
    """Returns (end time, requests finished); (now, []) when it does not apply."""
    lazy = eng._lazy
    if lazy is None:
        return _exact(eng, now, horizon)
    run = eng.running
    if (eng.waiting and len(run) < eng.max_num_seqs) or not run:
        return now, []
    if lazy.count == len(run):
        return _lazy(eng, lazy, now, horizon)
    if any(r.lz < 0 and r.num_computed != r.prompt_len + r.generated - 1 for r in reversed(run)):
        return now, []
    # Unusual (a request one token short of its prompt's end counts as decoding): the exact version.
    lazy.materialize_all(run)
    t, done = _exact(eng, now, horizon)
    lazy.add_decoders(eng.running)
    return t, done


def _decode_steps(eng: Engine, now: float, horizon: float, k: int, b: int, ctx: int) -> tuple[float, int]:
    """Up to k decode steps of a batch of b with total context ctx, stopping at `horizon`."""
    if b >= eng.max_num_seqs:
        horizon = float("inf")  # arrivals could only join the queue: they change nothing here
    work = StepWork(decode_seqs=b, seqs=b)
    t, j = now, 0
    while j < k and t < horizon:
        work.decode_context = ctx + j * b
        t += eng.cost.step_seconds(work)
        j += 1
    return t, j


def _exact(eng: Engine, now: float, horizon: float) -> tuple[float, list[SimRequest]]:
    run = eng.running
    if (
        (eng.waiting and len(run) < eng.max_num_seqs)
        or len(run) == 0
        # Newest first: a request still prefilling is most likely at the end of the batch.
        or any(r.num_computed != r.prompt_len + r.generated - 1 for r in reversed(run))
        or (eng._aborted_running and any(r.aborted for r in run))
    ):
        return now, []
    k = min(r.target_len - r.generated for r in run)
    kv = eng.kv
    while k > 1 and sum(kv.blocks_for(r.num_computed + k) - len(r.blocks) for r in run) > kv.num_free:
        k //= 2
    if k < 2:
        return now, []
    t, j = _decode_steps(eng, now, horizon, k, len(run), sum(r.num_tokens for r in run))
    done: list[SimRequest] = []
    for r in run:
        _advance(eng, r, j, t, done)
    if done:
        eng.running = [r for r in run if r.state == RUNNING]
    return t, done


def _advance(eng: Engine, r: SimRequest, j: int, t: float, done: list[SimRequest]) -> None:
    """r decodes j tokens ending at t: its blocks first, then a finish releases them."""
    kv = eng.kv
    extra = kv.blocks_for(r.num_computed + j) - len(r.blocks)
    if extra > 0:
        r.blocks += kv.allocate(extra)
    r.num_computed += j
    r.generated += j
    r.last_token_t = t
    if r.generated >= r.target_len:
        r.finish_t = t
        eng._release(r, FINISHED)
        done.append(r)


def _lazy(eng: Engine, lazy: LazyDecoders, now: float, horizon: float) -> tuple[float, list[SimRequest]]:
    """Every running request is a lazy decoder: only those with an event in the skipped steps are
    touched, in running order, exactly as `_exact` would touch them."""
    run = eng.running
    k = lazy.min_finish() - lazy.tick + 1  # the fewest tokens any running request has left
    if k < 2:
        return now, []
    b = len(run)
    bs = eng.block_size
    # Each request needs at most ceil(k / block) new blocks in k steps: if even that fits, k stands.
    if b * -(-k // bs) > eng.kv.num_free:
        lazy.materialize_all(run)
        t, done = _exact(eng, now, horizon)
        lazy.add_decoders(eng.running)
        return t, done
    t, j = _decode_steps(eng, now, horizon, k, b, lazy.context())
    last = lazy.tick + j - 1  # a request needs a block or finishes within the j steps iff its event <= last
    touched: list[SimRequest] = []
    events = lazy.events
    while events and events[0][0] <= last:
        r = heapq.heappop(events)[2]
        lazy.materialize(r)
        touched.append(r)
    touched.sort(key=lambda r: r.seq)
    done: list[SimRequest] = []
    for r in touched:
        _advance(eng, r, j, t, done)
    lazy.tick += j
    lazy.tick_end = t
    lazy.add_decoders(touched)
    if done:
        eng.running = [r for r in run if r.state == RUNNING]
    return t, done
