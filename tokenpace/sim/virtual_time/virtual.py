"""Virtual time: the same engine model driven by a simulated clock, with no sleeping.

Time jumps from one engine step to the next (or to the next arrival when idle), so an hour of traffic
takes seconds. The network is modelled as in the real server: each request reaches the engine one
sampled round trip after it is sent, which shifts every token the client sees by that round trip.

Each finished request becomes the core's `RequestRecord` (virtual seconds as nanoseconds), so the
virtual run is measured by the same definitions as a real one (`tokenpace.core.metrics`); or, for
runs too long to keep a record each, is folded into its step's bounded streaming summary
(`run_virtual_streamed`, sim/virtual_time/virtual_stream.py), whose open-loop sends are drawn as
the clock reaches them, not all up front, so what it holds is bounded by the requests in flight.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from tokenpace.core.metrics import NS_PER_S, e2e_ns, tpot_ns, ttft_ns
from tokenpace.core.record import RequestRecord
from tokenpace.sim.model.engine import Engine
from tokenpace.sim.model.request import SimRequest
from tokenpace.sim.profiles.profile import Network, Profile, get_profile
from tokenpace.sim.virtual_time.virtual_load import (
    LengthDraws,
    VirtualLoad,
    filler_block_hashes,
    ladder_send_times,
)
from tokenpace.sim.virtual_time.virtual_stream import StreamedStep

# Virtual second 0 maps to this timestamp: a record whose sent_ns is 0 would read as never sent.
ORIGIN_NS = NS_PER_S


def virtual_ns(t: float) -> int:
    """A virtual time (seconds from the run's start) as a record timestamp."""
    return ORIGIN_NS + round(t * NS_PER_S)


@dataclass(slots=True)
class VirtualResult:
    """One finished request: the record a client would have made, plus what only the engine knows."""

    record: RequestRecord
    step: int  # ladder step (0 for closed loop)
    engine_queue: float  # seconds from reaching the engine to its first step
    cached_tokens: int  # prompt tokens served by the prefix cache
    preemptions: int

    @property
    def index(self) -> int:
        return self.record.index

    @property
    def sent(self) -> float:
        """Send time, seconds from the run's start."""
        return (self.record.sent_ns - ORIGIN_NS) / NS_PER_S

    @property
    def input_tokens(self) -> int:
        return self.record.prompt_tokens or 0

    @property
    def output_tokens(self) -> int:
        return self.record.output_tokens

    @property
    def ttft(self) -> float:
        return (ttft_ns(self.record) or 0) / NS_PER_S

    @property
    def e2e(self) -> float:
        return (e2e_ns(self.record) or 0) / NS_PER_S

    @property
    def tpot(self) -> float | None:
        t = tpot_ns(self.record)
        return None if t is None else t / NS_PER_S

    def to_dict(self) -> dict[str, Any]:
        """One row of a virtual run's JSON (seconds)."""
        return {
            "index": self.index,
            "step": self.step,
            "sent": self.sent,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "ttft": self.ttft,
            "tpot": self.tpot,
            "e2e": self.e2e,
            "engine_queue": self.engine_queue,
            "cached_tokens": self.cached_tokens,
            "preemptions": self.preemptions,
        }


def sample_rtt(net: Network, rng: random.Random) -> float:
    """Round trip in seconds: the base RTT plus a half-normal jitter (never below the base)."""
    if net.rtt_ms <= 0 and net.jitter_ms <= 0:
        return 0.0
    return (net.rtt_ms + abs(rng.gauss(0.0, net.jitter_ms))) / 1e3


def run_virtual(
    load: VirtualLoad,
    profile: Profile | str | None = None,
    network: Network | None = None,
    max_seconds: float | None = None,
) -> list[VirtualResult]:
    """Run a load through the engine on the virtual clock; returns one result per finished request."""
    load.validate()
    prof = profile if isinstance(profile, Profile) else get_profile(profile)
    results = _VirtualRun(load, prof, network or prof.network).run(max_seconds)
    results.sort(key=lambda r: r.index)
    return results


def run_virtual_streamed(
    load: VirtualLoad,
    profile: Profile | str | None = None,
    network: Network | None = None,
    max_seconds: float | None = None,
) -> list[StreamedStep]:
    """The same run keeping no records: one bounded streaming summary per ladder step (one for a
    closed loop), in step order."""
    load.validate()
    prof = profile if isinstance(profile, Profile) else get_profile(profile)
    steps = [StreamedStep() for _ in range(max(1, len(load.rates)))]
    _VirtualRun(load, prof, network or prof.network, steps).run(max_seconds)
    for step in steps:
        step.flush()
    return steps


class _Sent(NamedTuple):
    """A request on its way: what was sent (a tuple: made once per request, cheaper than a class)."""

    step: int
    sent: float
    input_tokens: int
    output_tokens: int


class _VirtualRun:
    """One run's state: the engine, the requests in flight on the network, and the virtual clock."""

    def __init__(
        self,
        load: VirtualLoad,
        profile: Profile,
        network: Network,
        streamed: list[StreamedStep] | None = None,
    ) -> None:
        self.load, self.network = load, network
        self.streamed = streamed  # summary only: finished requests folded here, no records kept
        self.engine = Engine(profile, seed=load.seed)
        self.engine.enable_lazy_decode()  # no aborts, no per-token output: decoders advanced in bulk
        # Independent streams: the network's jitter never changes which requests are sent.
        arrivals, inputs, outputs = (
            np.random.default_rng(s) for s in np.random.SeedSequence(load.seed).spawn(3)
        )
        self.arrivals_rng = arrivals
        self.input_draws = LengthDraws(load.input_len, inputs)
        self.output_draws = LengthDraws(load.output_len, outputs)
        self.rtt_rng = random.Random(load.seed)  # as the real-time server draws its round trips
        # (engine arrival, index, what was sent): in flight on the network; indices are unique, so
        # the tuples never compare their third item
        self.heap: list[tuple[float, int, _Sent]] = []
        self.capacity = self.engine.capacity_tokens
        self.shared_prefix = load.shared_prefix
        self.jitter = network.rtt_ms > 0 or network.jitter_ms > 0  # else every round trip is 0
        # the API server's own per-request cost: the engine sees a request this much later (seconds)
        self.overhead = profile.efficiency.request_overhead_ms / 1e3
        self.results: list[VirtualResult] = []
        self.issued = 0
        self.t = 0.0
        self.closed = not load.rates and not load.sends
        self.limit = load.requests or None  # closed loop: total requests
        self.horizon = None if self.limit else load.step_duration_s  # closed loop: stop sending
        self.pending: Iterator[tuple[float, int]] = iter(())  # open-loop sends not drawn yet
        self.next_send: tuple[float, int] | None = None

    def send(self, at: float, step: int, lengths: tuple[int, int] | None = None) -> None:
        idx = self.issued
        self.issued += 1
        n_in, n_out = lengths or (self.input_draws.next(), self.output_draws.next())
        n_in = max(1, min(n_in, self.capacity - n_out))
        rtt = sample_rtt(self.network, self.rtt_rng) if self.jitter else 0.0
        heapq.heappush(self.heap, (at + rtt + self.overhead, idx, _Sent(step, at, n_in, n_out)))

    def run(self, max_seconds: float | None) -> list[VirtualResult]:
        if self.closed:
            users = self.load.concurrency
            for _ in range(min(users, self.limit or users)):
                self.send(0.0, 0)
        elif self.load.sends:
            for at, n_in, n_out in self.load.sends:
                self.send(at, 0, (n_in, n_out))
        elif self.streamed is None:  # the records grow with the run anyway: all sends up front
            for at, step in ladder_send_times(self.load, self.arrivals_rng):
                self.send(at, step)
        else:  # summary only: drawn as the clock reaches them, so only requests in flight are held
            self.pending = ladder_send_times(self.load, self.arrivals_rng)
            self.next_send = next(self.pending, None)
        engine, heap = self.engine, self.heap
        while True:
            if self.next_send is not None and (not heap or self.next_send[0] <= heap[0][0]):
                self._feed()  # (its own test, here to save the call when nothing is due)
            busy = engine.waiting or engine.running
            if not (heap or busy):
                break
            if max_seconds is not None and self.t > max_seconds:
                break
            if not busy and heap[0][0] > self.t:
                self.t = heap[0][0]
            if heap and heap[0][0] <= self.t:
                self._admit_arrivals()
            # fast_forward's own first test, here to save the call: a request waits for a free slot
            if not engine.waiting or len(engine.running) >= engine.max_num_seqs:
                t_ff, finished = engine.fast_forward(self.t, heap[0][0] if heap else float("inf"))
                if t_ff > self.t:
                    self.t = t_ff
                    for req in finished:
                        self._finish(req)
                    continue
            d = engine.schedule(self.t)
            if d <= 0:
                if not heap:
                    break  # nothing can ever run (cannot happen with validated lengths)
                self.t = max(self.t, heap[0][0])
                continue
            self.t += d
            for req in engine.complete(self.t, only_finished=True):
                self._finish(req)
        return self.results

    def _feed(self) -> None:
        """Send the open-loop requests due by the earliest arrival in flight: any later send arrives
        later still (a round trip is never negative), so the heap's top is the next arrival."""
        while self.next_send is not None and (not self.heap or self.next_send[0] <= self.heap[0][0]):
            self.send(*self.next_send)
            self.next_send = next(self.pending, None)

    def _admit_arrivals(self) -> None:
        """Every request that has reached the engine by now, in arrival order; the heap is fed after
        each (the caller fed it before), so its top stays the next arrival for the caller."""
        heap, t, engine = self.heap, self.t, self.engine
        while heap and heap[0][0] <= t:
            arrival, idx, s = heapq.heappop(heap)
            n = s.input_tokens
            bs = engine.block_size
            hashes = filler_block_hashes(idx, n, self.shared_prefix, bs)
            req = SimRequest(str(idx), [], s.output_tokens, ignore_eos=True, sink=s, prompt_len=n)
            # every block past the shared prefix's is this request's own
            engine.add_hashed(req, arrival, hashes, len(hashes) - min(self.shared_prefix, n) // bs)
            if self.next_send is not None and (not heap or self.next_send[0] <= heap[0][0]):
                self._feed()

    def _finish(self, req: SimRequest) -> None:
        s: _Sent = req.sink
        if self.streamed is None:
            self.results.append(_result(req, int(req.rid), s))
        else:
            assert req.first_token_t is not None and req.finish_t is not None and req.scheduled_t is not None
            row = (
                s.sent,
                req.first_token_t,
                req.finish_t,
                req.generated,
                req.prompt_len,
                req.scheduled_t - req.arrival_t,
            )
            self.streamed[s.step].add(row, req.cached_tokens, req.preemptions)
        more = self.limit is None or self.issued < self.limit
        if self.closed and more and (self.horizon is None or self.t < self.horizon):
            self.send(self.t, 0)


def _result(req: SimRequest, idx: int, s: _Sent) -> VirtualResult:
    assert req.first_token_t is not None and req.finish_t is not None and req.scheduled_t is not None
    sent_ns = virtual_ns(s.sent)
    record = RequestRecord(
        request_id=str(idx),
        index=idx,
        scheduled_ns=sent_ns,  # a virtual client is never late
        dispatched_ns=sent_ns,
        sent_ns=sent_ns,
        first_token_ns=virtual_ns(req.first_token_t),
        first_answer_ns=virtual_ns(req.first_token_t),
        end_ns=virtual_ns(req.finish_t),
        prompt_tokens_requested=s.input_tokens,
        prompt_tokens=req.prompt_len,
        output_tokens_requested=s.output_tokens,
        output_tokens_server=req.generated,
        finish_reason=req.finish_reason,
    )
    return VirtualResult(
        record=record,
        step=s.step,
        engine_queue=req.scheduled_t - req.arrival_t,
        cached_tokens=req.cached_tokens,
        preemptions=req.preemptions,
    )
