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
from dataclasses import dataclass, field
from typing import Any

from tokenpace.sim.costmodel import CostModel, StepWork, prefill_pairs
from tokenpace.sim.kvcache import KVCache, block_hashes
from tokenpace.sim.profile import Profile

WAITING, RUNNING, FINISHED, ABORTED = "waiting", "running", "finished", "aborted"


@dataclass(eq=False, slots=True)
class SimRequest:
    rid: str
    prompt: list[str]
    max_tokens: int
    min_tokens: int = 0
    ignore_eos: bool = False
    sink: Any = None  # the runner's handle (the HTTP stream, a record)
    # max_tokens is the client's own limit ("length" when reached); else the server's default cap,
    # where the model is taken to stop by itself ("stop"), as a real model does long before it.
    client_limit: bool = True
    # Set by the engine:
    prompt_len: int = 0
    target_len: int = 0  # tokens this request will generate
    finish_reason: str = "length"
    hashes: list[int] = field(default_factory=list)
    state: str = WAITING
    num_computed: int = 0
    generated: int = 0
    blocks: list[int] = field(default_factory=list)
    registered: int = 0  # prompt blocks already offered to the prefix cache
    cached_tokens: int = 0  # prefix-cache hit at first admission
    preemptions: int = 0
    aborted: bool = False
    arrival_t: float = 0.0
    scheduled_t: float | None = None  # first time it got into a step
    first_token_t: float | None = None
    last_token_t: float | None = None
    finish_t: float | None = None

    @property
    def num_tokens(self) -> int:
        return self.prompt_len + self.generated

    @property
    def finished(self) -> bool:
        return self.state == FINISHED


class Engine:
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
        self.cost = CostModel(profile)
        self.rng = random.Random(seed)
        self.waiting: deque[SimRequest] = deque()
        self.running: list[SimRequest] = []
        self.num_preemptions = 0
        self._step: list[tuple[SimRequest, int]] = []
        self._aborted_running = 0  # aborts of running requests since the last sweep (0: skip the scan)

    # ---- requests in and out -------------------------------------------------------------------
    def add(self, req: SimRequest, now: float) -> None:
        req.prompt_len = len(req.prompt)
        req.arrival_t = now
        req.hashes = block_hashes(req.prompt, self.block_size) if self.kv.prefix_caching else []
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
        self._drop_aborted()
        work = StepWork()
        step: list[tuple[SimRequest, int]] = []
        preempted = False
        budget = self.budget
        if not self.chunked and self._can_admit_head():
            # vLLM without chunked prefill: a step is prefills only, and decodes wait for it.
            budget = self._admit(step, work, budget, now, first_may_exceed=True)
        if not step:
            budget, preempted = self._schedule_running(step, work, budget)
            if not preempted and self.chunked:
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
        # The hottest loop of a virtual run (once per request per step): attributes in locals, and the
        # prefix-cache registration skipped once a request's prompt blocks are all registered.
        out: list[SimRequest] = []
        kv = self.kv
        bs = self.block_size
        any_left = False
        for req, n in self._step:
            if req.state != RUNNING:
                any_left = True
                continue
            computed = req.num_computed = req.num_computed + n
            if req.registered < len(req.hashes):
                full = min(computed // bs, len(req.hashes))
                while req.registered < full:
                    kv.register(req.blocks[req.registered], req.hashes[req.registered])
                    req.registered += 1
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
        self._step = []
        if any_left:
            self.running = [r for r in self.running if r.state == RUNNING]
        return out

    def fast_forward(self, now: float, horizon: float) -> tuple[float, list[SimRequest]]:
        """Virtual clock only: run consecutive decode-only steps in one go.

        Valid while nothing can change the batch: no request can be admitted (none waits, or the batch is
        at max_num_seqs), every running one decodes, no block
        shortage, and no arrival (`horizon`) before a step ends. Stops at the first finish, so the result
        is exactly what step-by-step scheduling would give, at O(steps + batch) instead of O(steps x batch).
        Returns (end time, requests finished); (now, []) when it does not apply.
        """
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
        b = len(run)
        if b >= self.max_num_seqs:
            horizon = float("inf")  # arrivals could only join the queue: they change nothing here
        ctx = sum(r.num_tokens for r in run)
        work = StepWork(decode_seqs=b, seqs=b)
        t, j = now, 0
        while j < k and t < horizon:
            work.decode_context = ctx + j * b
            t += self.cost.step_seconds(work)
            j += 1
        done: list[SimRequest] = []
        for r in run:
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
        if done:
            self.running = [r for r in run if r.state == RUNNING]
        return t, done

    # ---- internals -----------------------------------------------------------------------------
    def _drop_aborted(self) -> None:
        if not self._aborted_running:
            return
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
        kv = self.kv
        while self.waiting and budget > 0 and len(self.running) < self.max_num_seqs:
            req = self.waiting[0]
            hit = kv.lookup(req.hashes[: (req.num_tokens - 1) // self.block_size])
            start = len(hit) * self.block_size
            n = req.num_tokens - start
            if self.chunked:
                n = min(n, budget, self.chunk_cap or n)
            elif n > budget and not (first_may_exceed and not step):
                break
            need = kv.blocks_for(start + n) - len(hit)
            free = kv.num_free - kv.count_free_among(hit)
            if need > free - self.watermark and self.running:
                break  # KV full: wait for running requests to finish
            if need > free:
                break  # does not fit even in an empty engine's free space right now
            self.waiting.popleft()
            kv.touch(hit)
            req.blocks = hit + kv.allocate(need)
            req.num_computed = start
            req.registered = len(hit)
            if req.scheduled_t is None:
                req.scheduled_t = now
                req.cached_tokens = start
                kv.queries += req.prompt_len
                kv.hits += start
            req.state = RUNNING
            self.running.append(req)
            self._add_work(step, work, req, n)
            budget -= n
        return budget

    @staticmethod
    def _add_work(step: list[Any], work: StepWork, req: SimRequest, n: int) -> None:
        step.append((req, n))
        work.seqs += 1
        if req.num_computed + n == req.num_tokens and n == 1 and req.generated > 0:
            work.decode_seqs += 1
            work.decode_context += req.num_tokens
        else:
            work.prefill_tokens += n
            work.prefill_pairs += prefill_pairs(req.num_computed, n)
