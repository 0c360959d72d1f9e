"""The scheduler behaviours beyond vLLM's (profile fields, off by default): a per-step floor, a
per-request cost outside the steps, prefill-first steps that pause the running decodes, a second speed,
packed attention."""

from __future__ import annotations

import numpy as np
import pytest

from tokenpace.core.workload.lengths import parse_length
from tokenpace.sim import VirtualLoad, get_profile, run_virtual
from tokenpace.sim.model.costmodel import CostModel, StepWork
from tokenpace.sim.profiles.calibrated import sections_to_costs
from tokenpace.sim.profiles.profile import load_profile_file
from tokenpace.sim.profiles.profile_file import profile_to_toml


def _closed(users: int, prompt: int = 256, out: int = 32) -> VirtualLoad:
    return VirtualLoad(
        input_len=parse_length(str(prompt)), output_len=parse_length(str(out)),
        concurrency=users, requests=users * 4, seed=3,
    )  # fmt: skip


def test_defaults_are_vllms() -> None:
    e = get_profile().efficiency
    assert e.step_floor_ms == 0.0 and e.request_overhead_ms == 0.0
    assert get_profile().engine.chunked_prefill
    assert not get_profile().has_slow_speed


def test_a_second_speed_runs_only_when_asked_and_survives_its_file(tmp_path) -> None:
    extras = {"slow_step_extra_ms": 60.0, "slow_per_seq_extra_us": 100.0}
    two = get_profile().with_overrides(efficiency=extras)
    fast, slow = CostModel(two), CostModel(two.at_slow_speed())
    assert fast.decode_step_seconds(8, 512) == CostModel(get_profile()).decode_step_seconds(8, 512)
    assert slow.decode_step_seconds(8, 512) - fast.decode_step_seconds(8, 512) == pytest.approx(0.0608)
    assert not two.at_slow_speed().has_slow_speed  # the slow one is not slowed twice
    path = tmp_path / "two.toml"
    path.write_text(profile_to_toml(two))
    assert load_profile_file(path).efficiency == two.efficiency
    with pytest.raises(ValueError, match="has one speed"):
        get_profile().at_slow_speed()


def test_step_floor_hides_the_batch_until_it_exceeds_it() -> None:
    prof = get_profile().with_overrides(efficiency={"step_floor_ms": 20.0})
    cost, plain = CostModel(prof), CostModel(get_profile())
    # below the floor every batch costs the floor: flat in the batch
    assert cost.decode_step_seconds(1, 512) == cost.decode_step_seconds(32, 512) == 0.020
    assert plain.decode_step_seconds(32, 512) < 0.020
    # above it the batch's own cost shows unchanged
    big = plain.decode_step_seconds(2048, 2048)
    assert big > 0.020 and cost.decode_step_seconds(2048, 2048) == big


def test_step_floor_sets_the_time_per_output_token() -> None:
    prof = get_profile().with_overrides(efficiency={"step_floor_ms": 20.0})
    for users in (1, 8):
        tpot = [r.tpot or 0.0 for r in run_virtual(_closed(users), prof)]
        assert abs(float(np.median(tpot)) - 0.020) < 1e-6


def test_request_overhead_delays_ttft_and_takes_no_step_time() -> None:
    base = run_virtual(_closed(1), get_profile())
    slow = run_virtual(_closed(1), get_profile().with_overrides(efficiency={"request_overhead_ms": 15.0}))
    for a, b in zip(base, slow, strict=True):
        assert abs((b.ttft - a.ttft) - 0.015) < 1e-9
        assert abs((b.tpot or 0.0) - (a.tpot or 0.0)) < 1e-12


def test_prefill_first_pauses_the_running_decodes() -> None:
    """Without mixed batches a newcomer's prefill is a step of its own: the running requests' time per
    output token grows by the prefill steps they wait out; mixed (chunked) keeps them decoding."""
    mixed = get_profile()
    first = mixed.with_overrides(engine={"chunked_prefill": False})
    load = VirtualLoad(
        input_len=parse_length("2048"), output_len=parse_length("64"), rates=(20.0,),
        step_duration_s=10, seed=5,
    )  # fmt: skip  # open loop: newcomers arrive while others decode
    tpot_mixed = np.median([r.tpot or 0.0 for r in run_virtual(load, mixed)])
    tpot_first = np.median([r.tpot or 0.0 for r in run_virtual(load, first)])
    assert tpot_first > tpot_mixed


def test_packed_attention_prices_every_pair_of_a_step_holding_a_prefill() -> None:
    """A step with a prompt beside decoding requests pays for every (query, key) pair of the whole step
    in place of the prompt's own work, never less than that work (a prompt beside a decode costs no
    less than alone); a decode step and a prompt alone keep their prices."""
    plain = get_profile()
    a = CostModel(plain)
    work = StepWork(decode_seqs=8, decode_context=8 * 512, seqs=9)
    work.add_prefill(0, 1024)
    tokens, keys = 1024 + 8, 1024 + 8 * 512
    decode = a.base_seconds(StepWork(decode_seqs=8, decode_context=8 * 512, seqs=9))  # the newcomer's S too
    own = a._roofline_prefill(1024)  # the prompt's own compute
    for ns in (100.0, 0.01):  # the whole step's pairs dear; cheap, under the prompt's own work
        packed = plain.with_overrides(efficiency={"packed_pair_ns": ns})
        b = CostModel(packed)
        assert b.decode_step_seconds(8, 512) == a.decode_step_seconds(8, 512)
        assert b.prefill_seconds(1024) == a.prefill_seconds(1024)
        expected = decode + max(own, ns * 1e-9 * tokens * keys)
        assert b.base_seconds(work) == pytest.approx(expected, rel=1e-9)
        assert b.base_seconds(work) >= b.prefill_seconds(1024)
        # the calibration's view of the same step (StepCosts.joining_prefill) agrees with the simulator's
        joined = sections_to_costs(packed).joining_prefill([1024], 8, 8 * 512)
        assert joined == pytest.approx(b.base_seconds(work) - b.decode_step_seconds(8, 512), rel=1e-6)
        assert f"packed_pair_ns = {ns}" in profile_to_toml(packed)


def test_packed_attention_slows_newcomers_more_the_more_decode_beside_them() -> None:
    """The H200's shape: a group of newcomers' first token waits longer at 64 users than at 16, by more
    than the per-sequence engine's."""
    plain = get_profile()
    packed = plain.with_overrides(efficiency={"packed_pair_ns": 2.0})

    def ttft(prof, users: int) -> float:
        return float(np.median([r.ttft for r in run_virtual(_closed(users, prompt=1024), prof)]))

    assert ttft(packed, 64) / ttft(packed, 16) > ttft(plain, 64) / ttft(plain, 16)
