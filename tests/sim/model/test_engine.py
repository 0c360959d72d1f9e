"""Shapes the engine model must show, measured on the virtual clock."""

from __future__ import annotations

import dataclasses
from itertools import pairwise

import numpy as np
import pytest

from sim.builds import SOURCE_ONLY
from tokenpace.core.workload.lengths import LengthDist, parse_length
from tokenpace.sim import Engine, SimRequest, VirtualLoad, get_profile, run_virtual, summarize_virtual
from tokenpace.sim.virtual_time.virtual_load import filler_prompt


def L(spec: int | str) -> LengthDist:
    return parse_length(str(spec))


def _p(results, q, key="ttft"):
    xs = [getattr(r, key) for r in results if getattr(r, key) is not None]
    return float(np.percentile(xs, q))


def test_ttft_grows_linearly_with_input_length_at_low_load():
    lengths = [256, 1024, 2048, 4096, 8192]
    ttfts = []
    for n in lengths:
        rs = run_virtual(
            VirtualLoad(input_len=L(n), output_len=L(4), rates=(0.2,), step_duration_s=60, seed=1)
        )
        assert max(r.engine_queue for r in rs) < 0.1  # low load: at most the rest of a running step
        ttfts.append(_p(rs, 50))
    assert all(a < b for a, b in pairwise(ttfts))
    slope, intercept = np.polyfit(lengths, ttfts, 1)
    fit = np.polyval([slope, intercept], lengths)
    r2 = 1 - np.sum((np.array(ttfts) - fit) ** 2) / np.sum((np.array(ttfts) - np.mean(ttfts)) ** 2)
    assert r2 > 0.99, (ttfts, r2)
    assert 10 < ttfts[-1] / ttfts[0] < 40  # far from flat, roughly proportional beyond the fixed overhead


def test_rising_concurrency_raises_latency_and_throughput_saturates():
    rows = []
    for c in (1, 4, 16, 64, 256):
        s = summarize_virtual(
            run_virtual(VirtualLoad(input_len=L(512), output_len=L(256), concurrency=c, requests=4 * c))
        ).client
        rows.append((c, s.ttft_ms.p50, s.tpot_ms.p50, s.output_token_throughput))
    _, ttft, tpot, thr = zip(*rows, strict=True)
    assert ttft[-1] > 3 * ttft[0] and tpot[-1] > 3 * tpot[0]
    assert all(b >= a * 0.99 for a, b in pairwise(tpot))
    gains = [b / a for a, b in pairwise(thr)]
    assert gains[0] > 3  # 1 -> 4 users: nearly linear
    assert gains[-1] < 2  # 64 -> 256 users: 4x the users, far less than 2x the tokens: the knee
    assert gains[0] > 2 * gains[-1]


def test_chunked_prefill_lowers_p95_ttft_of_short_requests_among_long_ones():
    w = VirtualLoad(
        input_len=L("128,128,128,16000"), output_len=L(64), rates=(3.0,), step_duration_s=40, seed=3
    )
    p95 = {}
    for chunked in (True, False):
        prof = get_profile().with_overrides(engine={"chunked_prefill": chunked})
        rs = [r for r in run_virtual(w, prof) if r.input_tokens == 128]
        assert len(rs) > 50
        p95[chunked] = _p(rs, 95)
    assert p95[True] < 0.6 * p95[False], p95


def test_warm_prefix_is_several_times_faster_than_cold():
    base = VirtualLoad(input_len=L(4096), output_len=L(8), rates=(0.5,), step_duration_s=40, seed=4)
    cold = run_virtual(base)
    warm = run_virtual(dataclasses.replace(base, shared_prefix=4000))
    assert warm[0].cached_tokens == 0 and all(r.cached_tokens >= 3984 for r in warm[1:])
    ratio = _p(cold, 50) / _p(warm[1:], 50)
    assert ratio > 4, ratio


def test_prefix_cache_evicts_least_recently_used_blocks():
    prof = get_profile().with_overrides(engine={"num_gpu_blocks": 40})
    eng = Engine(prof)
    t = 0.0

    def run(prompt):
        nonlocal t
        r = SimRequest(str(t), prompt, 1)
        eng.add(r, t)
        while eng.has_work():
            t += eng.schedule(t)
            eng.complete(t)
        return r

    a, b = filler_prompt(1, 320, 0), filler_prompt(2, 320, 0)  # 20 blocks each; the cache holds 40
    run(a)
    assert run(a).cached_tokens == 304  # all but the last block: one token must be computed
    run(b)
    run(filler_prompt(3, 320, 0))  # evicts the least recently used: a's blocks
    assert run(b).cached_tokens == 304  # used more recently than a: kept
    assert run(a).cached_tokens == 0


def test_full_kv_cache_queues_and_preempts_but_finishes_everything():
    prof = get_profile().with_overrides(engine={"num_gpu_blocks": 64, "prefix_caching": False})
    eng = Engine(prof)
    reqs = [SimRequest(str(i), filler_prompt(i, 100, 0), 200, ignore_eos=True) for i in range(12)]
    for r in reqs:
        eng.add(r, 0.0)
    t, max_running = 0.0, 0
    while eng.has_work():
        d = eng.schedule(t)
        assert d > 0
        max_running = max(max_running, len(eng.running))
        t += d
        eng.complete(t)
    assert max_running < 12  # could not all run at once
    assert eng.num_preemptions > 0
    assert all(r.finished and r.generated == 200 for r in reqs)
    assert eng.kv.num_free == eng.kv.num_blocks


def test_eos_probability_and_ignore_eos():
    prof = get_profile().with_overrides(engine={"eos_prob": 0.2})
    eng = Engine(prof, seed=5)
    free = [SimRequest(f"f{i}", ["a"], 100, min_tokens=3) for i in range(50)]
    forced = SimRequest("x", ["a"], 100, ignore_eos=True)
    for r in [*free, forced]:
        eng.add(r, 0.0)
    assert forced.target_len == 100 and forced.finish_reason == "length"
    assert all(3 <= r.target_len < 100 and r.finish_reason == "stop" for r in free)
    assert 3 < np.mean([r.target_len for r in free]) < 15


@SOURCE_ONLY
def test_fast_forward_gives_the_same_results_as_step_by_step(monkeypatch):
    w = VirtualLoad(
        input_len=L("64:1024"), output_len=L("16:200"), rates=(4.0, 12.0), step_duration_s=10, seed=6
    )
    fast = run_virtual(w)
    calls: list[int] = []
    monkeypatch.setattr(Engine, "fast_forward", lambda self, now, horizon: calls.append(1) or (now, []))
    slow = run_virtual(w)
    assert calls  # the patch took effect
    assert len(fast) == len(slow) > 100
    for a, b in zip(fast, slow, strict=True):
        assert abs(a.ttft - b.ttft) < 1e-9 and abs(a.e2e - b.e2e) < 1e-9


@pytest.mark.timing
def test_an_hour_of_traffic_runs_in_seconds():
    import time

    w = VirtualLoad(input_len=L("256:2048"), output_len=L("64:512"), rates=(1, 2, 3, 4), step_duration_s=900)
    t0 = time.perf_counter()
    rs = run_virtual(w)
    assert max(r.sent for r in rs) > 3500
    assert time.perf_counter() - t0 < 20
