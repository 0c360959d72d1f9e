"""The engine model: continuous batching, one step at a time, with no clock of its own.

A runner (real time in server.py, virtual time in virtual.py) drives it: `add` requests as they arrive,
`schedule(now)` to pack the next step and learn how long it takes, then `complete(end)` when the step
is over, which returns the requests that produced a token. Requests that arrive while a step runs join
the next one, as in vLLM and SGLang.

Each request has `num_tokens` known tokens (prompt + generated) of which `num_computed` have KV in the
cache; a step computes some of the rest, and a request whose KV catches up samples one new token. So
prefill, chunked prefill, decode and recompute after preemption are one rule.
"""

from __future__ import annotations

import contextlib
import random
from collections import deque
from typing import Any

from tokenpace.sim.model.costmodel import CostModel, StepWork
from tokenpace.sim.model.fast_forward import FastForward
from tokenpace.sim.model.kvcache import KVCache, block_hashes
from tokenpace.sim.model.lazy_decode import LazyDecoders
from tokenpace.sim.model.request import ABORTED, FINISHED, RUNNING, WAITING, SimRequest
from tokenpace.sim.profiles.profile import Profile

__all__ = ["ABORTED", "FINISHED", "RUNNING", "WAITING", "Engine", "SimRequest"]


class Engine(FastForward):
    def __init__(self, profile: Profile, seed: int = 0) -> None:
        self.profile = profile
        e = profile.engine
        self.block_size = e.block_size
        self.max_num_seqs = e.max_num_seqs
        self.chunked = e.chunked_prefill
        # Without chunking a whole prompt must fit one step, as vLLM raises the budget to max_model_len.
        self.budget = (
            e.max_num_batched_tokens if self.chunked else max(e.max_num_batched_tokens, e.max_model_len)
        )
        self.eos_prob = e.eos_prob
        self.chunk_cap = (
            e.long_prefill_token_threshold if self.chunked and e.long_prefill_token_threshold > 0 else 0
        )
        self.kv = KVCache(profile.num_gpu_blocks, e.block_size, e.prefix_caching)
        self.watermark = max(1, int(0.01 * self.kv.num_blocks))  # headroom kept when admitting
        self.cost = CostModel(profile, seed=seed)
        self.rng = random.Random(seed)
        self.waiting: deque[SimRequest] = deque()
        self.running: list[SimRequest] = []
        self.num_preemptions = 0
        self._step: list[tuple[SimRequest, int]] = []
        self._aborted_running = 0  # aborts of running requests since the last sweep (0: skip the scan)
        self._seq = 0
        self._lazy: LazyDecoders | None = None  # virtual runs: decoders advanced by a shared counter
        self._due: list[SimRequest] | None = None  # a lazy step's materialized decoders (None: not one)

    def enable_lazy_decode(self) -> None:
        """Virtual clock only (complete(only_finished=True), no aborts): same results, O(events) steps."""
        self._lazy = LazyDecoders(self.block_size)

    # ---- requests in and out -------------------------------------------------------------------
    def add(self, req: SimRequest, now: float) -> None:
        req.prompt_len = len(req.prompt)
        hashes = block_hashes(req.prompt, self.block_size) if self.kv.prefix_caching else []
        self.add_hashed(req, now, hashes)

    def add_hashed(self, req: SimRequest, now: float, hashes: list[int], private_blocks: int = 0) -> None:
        """`add` for a request whose prompt_len and block hashes the runner already knows (virtual
        runs: `virtual_load.filler_block_hashes`, no prompt words made), the last `private_blocks`
        of them its own (`SimRequest.private_blocks`)."""
        req.arrival_t = now
        req.hashes = hashes if self.kv.prefix_caching else []
        req.private_blocks = private_blocks if req.hashes else 0
        if req.ignore_eos or self.eos_prob <= 0:  # _sample_length's first case, without the call
            req.target_len, req.finish_reason = req.max_tokens, "length" if req.client_limit else "stop"
        else:
            req.target_len, req.finish_reason = self._sample_length(req)
        self.waiting.append(req)

    def _sample_length(self, req: SimRequest) -> tuple[int, str]:
        at_limit = "length" if req.client_limit else "stop"
        if req.ignore_eos or self.eos_prob <= 0:
            return req.max_tokens, at_limit
        n = max(1, req.min_tokens)
        while n < req.max_tokens and self.rng.random() >= self.eos_prob:
            n += 1
        return n, (at_limit if n >= req.max_tokens else "stop")

    def abort(self, req: SimRequest) -> None:
        """The client went away: drop it now if queued, else after the step it is in."""
        if req.state in (FINISHED, ABORTED):
            return
        req.aborted = True
        if self._lazy is not None:
            self._lazy.materialize_all(self.running)
        if req.state == RUNNING:
            self._aborted_running += 1
        if req.state == WAITING:
            with contextlib.suppress(ValueError):
                self.waiting.remove(req)
            self._release(req, ABORTED)

    @property
    def capacity_tokens(self) -> int:
        """Longest sequence (prompt + output) the engine can ever hold."""
        return min(self.profile.engine.max_model_len, self.kv.num_blocks * self.block_size)

    def has_work(self) -> bool:
        return bool(self.waiting or self.running)

    # ---- one step ------------------------------------------------------------------------------
    def schedule(self, now: float) -> float:
        """Pack the next step; returns its duration in seconds (0: nothing could run)."""
        if self._aborted_running:
            self._drop_aborted()
        work = StepWork()
        step: list[tuple[SimRequest, int]] = []
        preempted = False
        budget = self.budget
        if not self.chunked and self._can_admit_head():
            # vLLM without chunked prefill: a step is prefills only, and decodes wait for it.
            budget = self._admit(step, work, budget, now, first_may_exceed=True)
        self._due = None
        if not step:
            if self._lazy is not None and self._schedule_lazy(work, budget):
                budget -= len(self.running)
            else:
                budget, preempted = self._schedule_running(step, work, budget)
            if not preempted and self.chunked and self.waiting:
                self._admit(step, work, budget, now, first_may_exceed=False)
        self._step = step
        return self.cost.step_seconds(work)

    def tokens_in_step(self) -> int:
        """How many requests the packed step will give a token to (partial prefills give none)."""
        return sum(1 for r, n in self._step if r.num_computed + n == r.num_tokens)

    def complete(self, end: float, only_finished: bool = False) -> list[SimRequest]:
        """Finish the packed step at time `end`; returns the requests that produced a token.

        With `only_finished`, only those that finished (the virtual runner needs no per-token list).
        """
        out: list[SimRequest] = []
        any_left = False
        due, lazy, step = self._due, self._lazy, self._step
        if due is not None and lazy is not None:  # a lazy step: only_finished is implied
            any_left = self._complete_due(due, lazy, end, out)
        if step:
            any_left = self._complete_entries(step, end, only_finished, out) or any_left
        self._step = []
        if any_left:
            self.running = [r for r in self.running if r.state == RUNNING]
        if lazy is not None:
            if due is None:
                lazy.add_decoders(self.running)
            elif step:  # a lazy step's due requests all finished: only its admissions can decode
                lazy.add_decoders([r for r, _ in step])
        return out

    def _complete_due(
        self, due: list[SimRequest], lazy: LazyDecoders, end: float, out: list[SimRequest]
    ) -> bool:
        """A lazy step's end: every lazy decoder gains a token by the tick; the due ones one by one."""
        any_left = False
        for r in due:  # each finishes in this step (lz_fin was this tick)
            r.num_computed += 1
            r.generated += 1
            r.last_token_t = r.finish_t = end
            self._release(r, FINISHED)
            out.append(r)
        if len(due) == 1:
            self.running.remove(due[0])  # by identity (eq=False), order kept: cheaper than a rebuild
        elif due:
            any_left = True
        lazy.tick += 1
        lazy.tick_end = end
        self._due = None
        return any_left

    def _complete_entries(
        self, step: list[tuple[SimRequest, int]], end: float, only_finished: bool, out: list[SimRequest]
    ) -> bool:
        # The hottest loop of an unlazy run (once per request per step): attributes in locals, and the
        # prefix-cache registration skipped once a request's prompt blocks are all registered.
        kv = self.kv
        bs = self.block_size
        any_left = False
        for req, n in step:
            if req.state != RUNNING:
                any_left = True
                continue
            computed = req.num_computed = req.num_computed + n
            if req.registered < len(req.hashes):
                full = min(computed // bs, len(req.hashes))
                if req.registered < full:
                    stop = full
                    if req.private_blocks and not req.preemptions:  # deferred: see _preempt
                        stop = min(full, len(req.hashes) - req.private_blocks)
                    if req.registered < stop:
                        kv.register_many(req.blocks, req.hashes, req.registered, stop)
                    req.registered = full
            if req.aborted:
                self._release(req, ABORTED)
                any_left = True
                continue
            if computed == req.prompt_len + req.generated:
                req.generated += 1
                if req.first_token_t is None:
                    req.first_token_t = end
                req.last_token_t = end
                if req.generated >= req.target_len:
                    req.finish_t = end
                    self._release(req, FINISHED)
                    any_left = True
                    if only_finished:
                        out.append(req)
                if not only_finished:
                    out.append(req)
        return any_left

    # ---- internals -----------------------------------------------------------------------------
    def _drop_aborted(self) -> None:
        self._aborted_running = 0
        if any(r.aborted for r in self.running):
            for r in self.running:
                if r.aborted:
                    self._release(r, ABORTED)
            self.running = [r for r in self.running if r.state == RUNNING]

    def _release(self, req: SimRequest, state: str) -> None:
        if req.blocks:
            self.kv.free(req.blocks)
            req.blocks = []
        req.state = state

    def _schedule_lazy(self, work: StepWork, budget: int) -> bool:
        """Pack a step in which every running request decodes, touching only the due ones (False:
        not such a step; everyone is then materialized for the ordinary path).

        A due request finishing in this step is materialized; one that only needs a new KV block
        stays lazy (it gets the block and its next event), so a decoder costs one heap entry per block.
        """
        lazy = self._lazy
        assert lazy is not None
        running = self.running
        n = len(running)
        tick = lazy.tick
        due = lazy.pop_due() if lazy.events and lazy.events[0][0] <= tick else []
        room = self.block_size
        finishing: list[SimRequest] = []
        need = context = 0
        for r in due:
            if r.lz_fin == tick:
                lazy.materialize(r)
                finishing.append(r)
                context += r.prompt_len + r.generated
                if r.num_computed + 1 > len(r.blocks) * room:
                    need += 1
            else:  # its event is a block: one more, whatever its numbers
                need += 1
        kv = self.kv
        # Every decoder fits the budget and every block need fits: no preemption, nobody left out.
        if lazy.count + len(finishing) != n or budget < n or (need and need > kv.num_free):
            lazy.materialize_all(running)
            return False
        if need:
            for r in due:  # running order, as the step-by-step loop allocates
                if r.lz >= 0:
                    r.blocks.append(kv.allocate_one())
                    lazy.took_block(r)
                elif r.num_computed + 1 > len(r.blocks) * room:
                    r.blocks.append(kv.allocate_one())
        context += lazy.total_base + lazy.count * tick
        work.seqs += n
        work.decode_seqs += n
        work.decode_context += context
        self._due = finishing
        return True

    def _schedule_running(
        self, step: list[tuple[SimRequest, int]], work: StepWork, budget: int
    ) -> tuple[int, bool]:
        kv = self.kv
        bs = self.block_size
        running = self.running
        chunked, chunk_cap = self.chunked, self.chunk_cap
        preempted = False
        decode_seqs = decode_context = 0  # summed here, added to `work` once (integers: order-free)
        append = step.append
        i, n_running = 0, len(running)
        while i < n_running and budget > 0:
            req = running[i]
            total = req.prompt_len + req.generated
            computed = req.num_computed
            n = total - computed
            if chunked and n > 1:
                n = min(n, budget, chunk_cap or n)
            need = -(-(computed + n) // bs) - len(req.blocks)
            if need > 0:
                while need > kv.num_free:
                    # Out of KV: recompute-preempt the newest running request, as vLLM does.
                    victim = running.pop()
                    n_running -= 1
                    self._preempt(victim)
                    preempted = True
                    if victim is req:
                        break
                if req.state != RUNNING:
                    break
                req.blocks += kv.allocate(need)
            if n == 1 and computed + 1 == total and req.generated > 0:
                append((req, 1))
                decode_seqs += 1
                decode_context += total
            else:
                self._add_work(step, work, req, n)
            budget -= n
            i += 1
        work.seqs += decode_seqs
        work.decode_seqs += decode_seqs
        work.decode_context += decode_context
        return budget, preempted

    def _preempt(self, req: SimRequest) -> None:
        if req.private_blocks and not req.preemptions:
            # Its private blocks were never offered to the cache: offer them now, as they would have
            # been, so that its readmission finds them. Until now nobody could look them up (their
            # hashes are its own) or evict them (it held them), so the cache is as if they had been
            # (a finished request's are never looked up again: they are never offered).
            private_from = len(req.hashes) - req.private_blocks
            if req.registered > private_from:
                self.kv.register_many(req.blocks, req.hashes, private_from, req.registered)
        self.kv.free(req.blocks)
        req.blocks = []
        req.num_computed = 0
        req.registered = 0
        req.state = WAITING
        req.preemptions += 1
        self.num_preemptions += 1
        self.waiting.appendleft(req)

    def _can_admit_head(self) -> bool:
        return bool(self.waiting) and len(self.running) < self.max_num_seqs

    def _admit(self, step: list[Any], work: StepWork, budget: int, now: float, first_may_exceed: bool) -> int:
        kv, bs, waiting, running = self.kv, self.block_size, self.waiting, self.running
        while waiting and budget > 0 and len(running) < self.max_num_seqs:
            req = waiting[0]
            num_tokens = req.prompt_len + req.generated
            hit = kv.lookup(req.hashes[: (num_tokens - 1) // bs]) if req.hashes else []
            start = len(hit) * bs
            n = num_tokens - start
            if self.chunked:
                n = min(n, budget, self.chunk_cap or n)
            elif n > budget and not (first_may_exceed and not step):
                break
            need = -(-(start + n) // bs) - len(hit)
            free = kv.num_free - (kv.count_free_among(hit) if hit else 0)
            if need > free - self.watermark and running:
                break  # KV full: wait for running requests to finish
            if need > free:
                break  # does not fit even in an empty engine's free space right now
            waiting.popleft()
            if hit:
                kv.touch(hit)
                req.blocks = hit + kv.allocate(need)
            else:
                req.blocks = kv.allocate(need)
            req.num_computed = start
            req.registered = len(hit)
            if req.scheduled_t is None:
                req.scheduled_t = now
                req.cached_tokens = start
                kv.queries += req.prompt_len
                kv.hits += start
            req.state = RUNNING
            req.seq = self._seq
            self._seq += 1
            running.append(req)
            self._add_work(step, work, req, n)
            budget -= n
        return budget

    @staticmethod
    def _add_work(step: list[Any], work: StepWork, req: SimRequest, n: int) -> None:
        step.append((req, n))
        work.seqs += 1
        num_tokens = req.prompt_len + req.generated
        if req.num_computed + n == num_tokens and n == 1 and req.generated > 0:
            work.decode_seqs += 1
            work.decode_context += num_tokens
        else:
            work.add_prefill(req.num_computed, n)
