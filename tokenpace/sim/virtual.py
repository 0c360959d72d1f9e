"""Virtual time: the same engine model driven by a simulated clock, with no sleeping.

Time jumps from one engine step to the next (or to the next arrival when idle), so an hour of traffic
takes seconds. The network is modelled as in the real server: each request reaches the engine one
sampled round trip after it is sent, which shifts every token the client sees by that round trip.
"""

from __future__ import annotations

import heapq
import random
from dataclasses import dataclass
from typing import Any

import numpy as np

from tokenpace.sim.engine import Engine, SimRequest
from tokenpace.sim.profile import Network, Profile, get_profile
from tokenpace.sim.workload import Workload, arrival_times, prompt_words


@dataclass(slots=True)
class VirtualResult:
    """One request as a client would have measured it (seconds from the run's start)."""

    index: int
    step: int  # ladder step (0 for closed loop)
    sent: float
    input_tokens: int
    output_tokens: int
    ttft: float
    e2e: float
    queue: float  # engine arrival to first scheduled
    cached_tokens: int
    preemptions: int

    @property
    def tpot(self) -> float | None:
        if self.output_tokens < 2:
            return None
        return (self.e2e - self.ttft) / (self.output_tokens - 1)


def sample_rtt(net: Network, rng: random.Random) -> float:
    """Round trip in seconds: the base RTT plus a half-normal jitter (never below the base)."""
    if net.rtt_ms <= 0 and net.jitter_ms <= 0:
        return 0.0
    return (net.rtt_ms + abs(rng.gauss(0.0, net.jitter_ms))) / 1e3


def run_virtual(
    workload: Workload,
    profile: Profile | str | None = None,
    network: Network | None = None,
    max_seconds: float | None = None,
) -> list[VirtualResult]:
    """Run a workload through the engine on the virtual clock; returns one result per finished request."""
    workload.validate()
    prof = profile if isinstance(profile, Profile) else get_profile(profile)
    net = network or prof.network
    rng = random.Random(workload.seed)
    engine = Engine(prof, seed=workload.seed)
    cap = engine.capacity_tokens
    heap: list[tuple[float, int, int, float]] = []  # (engine arrival, index, step, sent)
    counter = 0

    def push(sent: float, step: int) -> None:
        nonlocal counter
        heapq.heappush(heap, (sent + sample_rtt(net, rng), counter, step, sent))
        counter += 1

    closed = not workload.rates
    if closed:
        limit = workload.requests or None
        for _ in range(min(workload.concurrency, limit or workload.concurrency)):
            push(0.0, 0)
        horizon = None if limit else workload.step_duration_s
    else:
        for t, k in arrival_times(workload, rng):
            push(t, k)
        limit, horizon = None, None

    meta: dict[int, tuple[int, float]] = {}
    results: list[VirtualResult] = []
    issued = len(heap)
    t = 0.0

    def on_finish(req: SimRequest) -> None:
        nonlocal issued
        idx = int(req.rid)
        step, sent = meta.pop(idx)
        results.append(_result(req, idx, step, sent))
        if closed and (limit is None or issued < limit) and (horizon is None or t < horizon):
            push(t, 0)
            issued += 1

    while heap or engine.has_work():
        if max_seconds is not None and t > max_seconds:
            break
        if not engine.has_work() and heap and heap[0][0] > t:
            t = heap[0][0]
        while heap and heap[0][0] <= t:
            arr, idx, step, sent = heapq.heappop(heap)
            n_in = workload.input_len.sample(rng)
            n_out = workload.output_len.sample(rng)
            n_in = max(1, min(n_in, cap - n_out))
            req = SimRequest(
                str(idx), prompt_words(idx, n_in, workload.shared_prefix), n_out, ignore_eos=True
            )
            meta[idx] = (step, sent)
            engine.add(req, arr)
        t_ff, finished = engine.fast_forward(t, heap[0][0] if heap else float("inf"))
        if t_ff > t:
            t = t_ff
            for req in finished:
                on_finish(req)
            continue
        d = engine.schedule(t)
        if d <= 0:
            if not heap:
                break  # nothing can ever run (cannot happen with validated lengths)
            t = max(t, heap[0][0])
            continue
        t += d
        for req in engine.complete(t):
            if req.finished:
                on_finish(req)
    results.sort(key=lambda r: r.index)
    return results


def _result(req: SimRequest, idx: int, step: int, sent: float) -> VirtualResult:
    assert req.first_token_t is not None and req.finish_t is not None and req.scheduled_t is not None
    return VirtualResult(
        index=idx,
        step=step,
        sent=sent,
        input_tokens=req.prompt_len,
        output_tokens=req.generated,
        ttft=req.first_token_t - sent,
        e2e=req.finish_t - sent,
        queue=req.scheduled_t - req.arrival_t,
        cached_tokens=req.cached_tokens,
        preemptions=req.preemptions,
    )


def summarize(results: list[VirtualResult]) -> dict[str, Any]:
    """Percentiles (ms) and throughput over the window from first send to last completion."""
    if not results:
        return {"n": 0}
    out: dict[str, Any] = {"n": len(results)}
    series = {
        "ttft_ms": [r.ttft * 1e3 for r in results],
        "tpot_ms": [r.tpot * 1e3 for r in results if r.tpot is not None],
        "e2e_ms": [r.e2e * 1e3 for r in results],
        "queue_ms": [r.queue * 1e3 for r in results],
    }
    for name, xs in series.items():
        if xs:
            a = np.asarray(xs)
            out[name] = {
                "mean": float(a.mean()),
                **{f"p{q}": float(np.percentile(a, q)) for q in (50, 90, 95, 99)},
                "max": float(a.max()),
                "n": len(xs),
            }
    start = min(r.sent for r in results)
    end = max(r.sent + r.e2e for r in results)
    window = max(end - start, 1e-9)
    out["duration_s"] = window
    out["request_throughput"] = len(results) / window
    out["output_token_throughput"] = sum(r.output_tokens for r in results) / window
    out["preemptions"] = sum(r.preemptions for r in results)
    return out
