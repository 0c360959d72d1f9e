"""Lazy decoders (sim/lazy_decode.py) must give exactly what the step-by-step engine gives.

Each pinned scenario (chunked and unchunked prefill, prefix-cache hits, preemptions under a small
KV cache, early EOS), plus a load that keeps the batch full so fast-forward runs on the lazy
counters, is run twice: as virtual runs run it (lazy) and with lazy decoding switched off. Every
record must match.
"""

from __future__ import annotations

import pytest

from tokenpace.core.workload.lengths import parse_length
from tokenpace.sim import VirtualLoad, get_profile, run_virtual
from tokenpace.sim.engine import Engine
from tokenpace.sim.profile import Profile

from .test_sim_virtual_pinned import _case, _digest


def _full_batch() -> tuple[VirtualLoad, Profile]:
    load = VirtualLoad(
        input_len=parse_length("16:300"),
        output_len=parse_length("40:400"),
        concurrency=40,
        requests=300,
        seed=11,
    )
    return load, get_profile().with_overrides(engine={"max_num_seqs": 16, "num_gpu_blocks": 400})


def _block_events() -> tuple[VirtualLoad, Profile]:
    """The speed benchmark's shape (prompts of whole blocks: a decoder needs a block at once), with a
    shared prefix and a KV cache small enough to preempt: block events, finishes, hits, recomputes."""
    load = VirtualLoad(
        input_len=parse_length("128,64,200"),
        output_len=parse_length("1:64"),
        rates=(100.0,),
        step_duration_s=4,
        shared_prefix=32,
        seed=13,
    )
    return load, get_profile().with_overrides(engine={"num_gpu_blocks": 220})


@pytest.mark.parametrize("name", ["ladder-prefix", "preempt-eos", "unchunked", "full-batch", "block-events"])
def test_lazy_decoding_changes_no_record(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    extra = {"full-batch": _full_batch, "block-events": _block_events}
    load, profile = extra[name]() if name in extra else _case(name)
    lazy = run_virtual(load, profile)
    monkeypatch.setattr(Engine, "enable_lazy_decode", lambda self: None)
    eager = run_virtual(load, profile)
    assert len(lazy) == len(eager) > 0
    assert _digest(lazy) == _digest(eager)
    assert [r.record for r in lazy] == [r.record for r in eager]
