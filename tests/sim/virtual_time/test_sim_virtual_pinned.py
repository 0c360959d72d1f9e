"""Pinned virtual runs: speeding up the virtual engine must not change what it computes.

Each case's values were recorded before the event loop was optimised (issue 26 item 5): a digest of
every request's record (exact) and the summary's percentiles (to 1e-9 relative). Scenarios cover
chunked and unchunked prefill, the prefix cache, preemption under a small KV cache, early EOS,
ladders and closed loops, so every engine path the fast paths touch is pinned.
"""

from __future__ import annotations

import hashlib

import pytest

from tokenpace.core.workload.lengths import parse_length
from tokenpace.sim import VirtualLoad, VirtualResult, get_profile, run_virtual, summarize_virtual
from tokenpace.sim.profiles.profile import Profile


def _case(name: str) -> tuple[VirtualLoad, Profile]:
    base = get_profile()
    if name == "ladder-prefix":
        load = VirtualLoad(
            input_len=parse_length("lognormal:512,0.5"),
            output_len=parse_length("8:200"),
            rates=(20.0, 60.0),
            step_duration_s=10,
            shared_prefix=64,
            seed=3,
        )
        return load, base
    if name == "preempt-eos":
        load = VirtualLoad(
            input_len=parse_length("64:600"),
            output_len=parse_length("16:300"),
            concurrency=32,
            requests=150,
            seed=5,
        )
        return load, base.with_overrides(engine={"num_gpu_blocks": 300, "eos_prob": 0.02})
    if name == "unchunked":
        load = VirtualLoad(
            input_len=parse_length("128,512,2048"),
            output_len=parse_length("32@3,256@1"),
            rates=(15.0,),
            arrival="gamma",
            burstiness=0.5,
            step_duration_s=12,
            seed=7,
        )
        return load, base.with_overrides(engine={"chunked_prefill": False, "max_num_seqs": 24})
    raise KeyError(name)


def _digest(results: list[VirtualResult]) -> str:
    h = hashlib.sha256()
    for r in results:
        rec = r.record
        row = (
            rec.index,
            rec.sent_ns,
            rec.first_token_ns,
            rec.end_ns,
            rec.prompt_tokens,
            rec.output_tokens_server,
            rec.finish_reason,
            r.step,
            round(r.engine_queue * 1e9),
            r.cached_tokens,
            r.preemptions,
        )
        h.update(repr(row).encode())
    return h.hexdigest()[:16]


def _percentiles(results: list[VirtualResult]) -> list[float | None]:
    s = summarize_virtual(results, with_ci=False)
    c = s.client
    return [
        float(len(results)),
        c.ttft_ms.p50,
        c.ttft_ms.p95,
        c.ttft_ms.p99,
        c.tpot_ms.p50,
        c.tpot_ms.p95,
        c.e2e_ms.p50,
        c.e2e_ms.p99,
        s.engine_queue_ms.p50,
        float(s.cached_tokens),
        float(s.preemptions),
    ]


PINNED: dict[str, tuple[str, list[float]]] = {
    # n, TTFT p50/p95/p99, TPOT p50/p95, E2E p50/p99 (ms), engine queue p50 (ms), cached tokens, preemptions
    "ladder-prefix": (
        "8266a5ad7f531511",
        [
            767,
            257.272532,
            1789.0228953999997,
            1941.41973692,
            41.44496243661972,
            74.38051527212171,
            4279.311097,
            11257.39244506,
            90.64506424965302,
            49024,
            0,
        ],
    ),
    "preempt-eos": (
        "6ea9da006d4dcdb7",
        [
            150,
            2747.8388415,
            3298.5049144999984,
            3548.1378608099985,
            8.622844084713531,
            10.165259293709967,
            3931.5532670000002,
            5652.960040769999,
            2727.8655829878016,
            0,
            44,
        ],
    ),
    "unchunked": (
        "8916c8153df3daa4",
        [
            180,
            79.19211250000001,
            726.1310271499996,
            849.9814722900003,
            14.259741087096774,
            25.328279677419353,
            713.268532,
            5090.26749244,
            16.211539183780708,
            0,
            0,
        ],
    ),
}


@pytest.mark.parametrize("name", ["ladder-prefix", "preempt-eos", "unchunked"])
def test_a_seeded_virtual_run_gives_the_pinned_records_and_summary(name: str) -> None:
    load, profile = _case(name)
    results = run_virtual(load, profile)
    digest, numbers = PINNED[name]
    assert _percentiles(results) == pytest.approx(numbers, rel=1e-9)
    assert _digest(results) == digest
