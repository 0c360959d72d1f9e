"""Lazy decoders (sim/model/lazy_decode.py) must give exactly what the step-by-step engine gives.

Each pinned scenario (chunked and unchunked prefill, prefix-cache hits, preemptions under a small
KV cache, early EOS), plus a load that keeps the batch full so fast-forward runs on the lazy
counters, is run twice: as virtual runs run it (lazy) and with lazy decoding switched off. Every
record must match.
"""

from __future__ import annotations

import pytest

from sim.builds import SOURCE_ONLY
from sim.virtual_time.test_sim_virtual_pinned import _case, _digest
from tokenpace.core.workload.lengths import parse_length
from tokenpace.sim import SimRequest, VirtualLoad, get_profile, run_virtual
from tokenpace.sim.model.engine import Engine
from tokenpace.sim.profiles.profile import Profile


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


@SOURCE_ONLY
@pytest.mark.parametrize("name", ["ladder-prefix", "preempt-eos", "unchunked", "full-batch", "block-events"])
def test_lazy_decoding_changes_no_record(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    extra = {"full-batch": _full_batch, "block-events": _block_events}
    load, profile = extra[name]() if name in extra else _case(name)
    lazy = run_virtual(load, profile)
    calls: list[int] = []
    monkeypatch.setattr(Engine, "enable_lazy_decode", lambda self: calls.append(1))
    eager = run_virtual(load, profile)
    assert calls  # the patch took effect (it cannot in the compiled build: see SOURCE_ONLY)
    assert len(lazy) == len(eager) > 0
    assert _digest(lazy) == _digest(eager)
    assert [r.record for r in lazy] == [r.record for r in eager]


@SOURCE_ONLY
@pytest.mark.parametrize("name", ["preempt-eos", "ladder-prefix", "block-events"])
def test_offering_private_blocks_only_at_a_preemption_changes_no_record(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A virtual prompt's own blocks are offered to the prefix cache only if it is preempted
    (SimRequest.private_blocks); offering them all at prefill, as for a real prompt, must agree."""
    load, profile = _block_events() if name == "block-events" else _case(name)
    deferred = run_virtual(load, profile)
    add_hashed = Engine.add_hashed
    calls: list[int] = []

    def offer_all(self: Engine, req: SimRequest, now: float, hashes: list[int], _: int = 0) -> None:
        calls.append(1)
        add_hashed(self, req, now, hashes)

    monkeypatch.setattr(Engine, "add_hashed", offer_all)
    offered = run_virtual(load, profile)
    assert calls  # the patch took effect
    assert sum(r.preemptions for r in deferred) > 0 or name == "ladder-prefix"
    assert [r.record for r in deferred] == [r.record for r in offered]
    assert _digest(deferred) == _digest(offered)
