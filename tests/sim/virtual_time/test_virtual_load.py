"""The virtual runner sends what the core's workload pieces say, and is measured by the core's metrics."""

from __future__ import annotations

import numpy as np
import pytest

from tokenpace.core.metrics import summarize
from tokenpace.core.workload.lengths import parse_length
from tokenpace.sim import VirtualLoad, get_network, run_virtual, summarize_virtual
from tokenpace.sim.model.kvcache import block_hashes
from tokenpace.sim.virtual_time.virtual_load import filler_block_hashes, filler_prompt, ladder_send_times


def test_every_length_form_bench_accepts_shapes_the_virtual_requests():
    load = VirtualLoad(
        input_len=parse_length("lognormal:512,0.5"),
        output_len=parse_length("16@3,64@1"),
        rates=(20.0,),
        step_duration_s=60,
        seed=2,
    )
    rs = run_virtual(load)
    assert len(rs) > 1000
    inputs = np.array([r.input_tokens for r in rs])
    assert 470 < np.median(inputs) < 550  # lognormal:MEDIAN,SIGMA
    assert np.log(inputs).std() == pytest.approx(0.5, abs=0.05)
    outputs = [r.output_tokens for r in rs]
    assert set(outputs) == {16, 64}
    assert outputs.count(16) / len(outputs) == pytest.approx(0.75, abs=0.04)  # weights 3:1


def test_ladder_steps_run_the_core_arrival_process_within_each_step():
    load = VirtualLoad(rates=(2.0, 5.0), arrival="constant", step_duration_s=10)
    times = list(ladder_send_times(load, np.random.default_rng(0)))
    assert [t for t, k in times if k == 0] == pytest.approx([0.5 * i for i in range(20)])
    assert [t for t, k in times if k == 1] == pytest.approx([10 + 0.2 * i for i in range(50)])
    poisson = VirtualLoad(rates=(50.0,), step_duration_s=100)
    sends = [t for t, _ in ladder_send_times(poisson, np.random.default_rng(1))]
    assert len(sends) == pytest.approx(5000, rel=0.05) and max(sends) < 100
    assert np.diff(sends).std() == pytest.approx(0.02, rel=0.1)  # exponential gaps: std = mean


def test_the_network_never_changes_which_requests_are_sent():
    load = VirtualLoad(input_len=parse_length("64:2048"), output_len=parse_length("8:64"), rates=(4.0,))
    local = run_virtual(load, network=get_network("local"))
    far = run_virtual(load, network=get_network("cloud-cross-region"))
    assert [(r.sent, r.input_tokens, r.output_tokens) for r in local] == [
        (r.sent, r.input_tokens, r.output_tokens) for r in far
    ]
    assert np.median([r.ttft for r in far]) > np.median([r.ttft for r in local]) + 0.08


def test_virtual_numbers_are_the_core_metrics_of_the_records():
    load = VirtualLoad(input_len=parse_length("128:1024"), output_len=parse_length("1:64"), rates=(8.0,))
    rs = run_virtual(load)
    s = summarize_virtual(rs)
    assert s.client.to_dict() == summarize([r.record for r in rs]).to_dict()
    ttft_ms = np.array([r.ttft for r in rs]) * 1e3
    assert s.client.ttft_ms.p99 == pytest.approx(np.percentile(ttft_ms, 99))
    one_token = [r for r in rs if r.output_tokens == 1]
    assert one_token and all(r.tpot is None for r in one_token)
    assert s.client.tpot_ms.n == len(rs) - len(one_token)
    for r in rs[:50]:
        if r.tpot is not None:
            assert r.tpot == pytest.approx((r.e2e - r.ttft) / (r.output_tokens - 1), abs=2e-9)
    assert s.engine_queue_ms.n == len(rs) and s.client.queue_ms.max == 0  # a virtual client is never late
    assert s.client.counts["ok"] == len(rs) and s.client.window_s > 55


@pytest.mark.parametrize("shared_prefix", [0, 5, 16, 33, 64, 200])
def test_the_filler_prompts_block_hashes_are_equal_exactly_where_the_words_hashes_are(shared_prefix):
    """The virtual runner hashes no words: its arithmetic hashes must give the prefix cache the same
    equalities (shared blocks equal across requests, every other block its own)."""
    lengths = [1, 15, 16, 17, 32, 40, 64, 65, 80, 100, 200, 33, 48]
    words, arithmetic = {}, {}
    for index, n in enumerate(lengths):
        real = block_hashes(filler_prompt(index, n, shared_prefix), 16)
        fast = filler_block_hashes(index, n, shared_prefix, 16)
        assert len(real) == len(fast) == n // 16
        for k, (a, b) in enumerate(zip(real, fast, strict=True)):
            words[(index, k)], arithmetic[(index, k)] = a, b
    keys = list(words)
    for i, u in enumerate(keys):
        for v in keys[i + 1 :]:
            assert (words[u] == words[v]) == (arithmetic[u] == arithmetic[v]), (u, v)
    assert len(set(arithmetic.values())) < len(keys) or shared_prefix < 16  # some blocks are shared
