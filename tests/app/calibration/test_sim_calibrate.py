"""Calibration on the simulator itself: a profile fitted to virtual runs of another profile gets its
step costs back (within 5 %), survives its TOML file, and predicts loads it never saw."""

from __future__ import annotations

import pytest

from tokenpace.core.analysis.calibration.engine_fit import fit_engine
from tokenpace.core.analysis.calibration.engine_obs import MeasuredLoad
from tokenpace.core.workload.lengths import parse_length
from tokenpace.sim.model.costmodel import CostModel
from tokenpace.sim.profiles.calibrated import calibrated_profile, fit_provenance, sections_to_costs
from tokenpace.sim.profiles.profile import Profile, ProfileError, get_profile, load_profile_file
from tokenpace.sim.profiles.profile_file import profile_to_toml
from tokenpace.sim.virtual_time.replay import predict
from tokenpace.sim.virtual_time.replicas import run_replicated
from tokenpace.sim.virtual_time.virtual import run_virtual
from tokenpace.sim.virtual_time.virtual_load import VirtualLoad

COSTS = ("fixed", "per_seq", "weights", "per_context", "per_token", "per_pair")


def _measured(src: Profile, label: str, load: VirtualLoad) -> MeasuredLoad:
    records = tuple(r.record for r in run_virtual(load, src))
    return MeasuredLoad(label, records, concurrency=load.concurrency or None, rate=(load.rates or (None,))[0])


def _short_sweep(src: Profile) -> list[MeasuredLoad]:
    """An input-length ladder at concurrency 1, then concurrency 2 and 4: what a user would run."""
    out = []
    for n in (16, 128, 256, 512, 1024, 2048):
        load = VirtualLoad(parse_length(str(n)), parse_length("32"), concurrency=1, requests=8)
        out.append(_measured(src, f"c=1 in={n}", load))
    for c in (2, 4):
        load = VirtualLoad(parse_length("512"), parse_length("32"), concurrency=c, requests=24)
        out.append(_measured(src, f"c={c}", load))
    return out


@pytest.mark.parametrize("name", ["llama-3.1-8b-h100", "llama-3.1-70b-h100-tp4"])
def test_calibration_recovers_the_source_profiles_parameters(name: str) -> None:
    src = get_profile(name).with_overrides(engine={"max_num_seqs": 3})
    fit = fit_engine(_short_sweep(src))
    truth = sections_to_costs(src)
    for field in COSTS:
        got, want = getattr(fit.costs, field), getattr(truth, field)
        assert got == pytest.approx(want, rel=0.05), field
    assert fit.max_num_seqs == 3  # c=4 never had more than 3 decoding: the limit is seen
    assert {p.name for p in fit.params if p.identified} >= {"prefill_per_token", "per_seq", "max_num_seqs"}


def test_round_trip_is_recovered_from_the_short_prompts_floor() -> None:
    src = get_profile().with_overrides(engine={"max_num_seqs": 3}, network={"rtt_ms": 4.0, "jitter_ms": 0.0})
    fit = fit_engine(_short_sweep(src))
    assert fit.costs.rtt == pytest.approx(0.004, rel=0.05)
    truth, cm = sections_to_costs(src), CostModel(src)
    for batch in (1, 2, 4, 8):  # the step times, including a batch past the sweep's largest
        assert fit.costs.decode_step(batch, batch * 600) == pytest.approx(
            cm.decode_step_seconds(batch, 600), rel=0.05
        )
    assert fit.costs.ttft(1000) == pytest.approx(truth.ttft(1000), rel=0.05)


def test_without_a_ladder_or_a_saturated_load_it_says_what_it_left_at_a_default() -> None:
    src = get_profile()
    loads = [
        _measured(src, "c=1", VirtualLoad(parse_length("256"), parse_length("16"), concurrency=1, requests=6))
    ]
    fit = fit_engine(loads)
    defaulted = {p.name: p.how for p in fit.params if not p.identified}
    assert "input-length ladder" in defaulted["prefill_per_token"]
    assert "max_num_seqs" in defaulted and "per_seq" in defaulted


def test_a_calibration_of_closed_loops_only_warns_that_an_idle_engine_was_never_seen() -> None:
    src = get_profile().with_overrides(engine={"max_num_seqs": 3})
    closed = _short_sweep(src)
    assert any("closed loops only" in line for line in fit_engine(closed).holds)
    poisson = VirtualLoad(parse_length("512"), parse_length("32"), rates=(2.0,), step_duration_s=10, seed=3)
    with_rate = [*closed, _measured(src, "2/s", poisson)]
    assert not any("closed loops only" in line for line in fit_engine(with_rate).holds)


def test_a_calibrated_profile_survives_its_toml_file_and_serves_the_same_costs(tmp_path) -> None:
    src = get_profile().with_overrides(engine={"max_num_seqs": 3})
    fit = fit_engine(_short_sweep(src))
    prof = calibrated_profile(fit, "mine", "m", {"runs": ["a.json"], **fit_provenance(fit)})
    path = tmp_path / "mine.toml"
    path.write_text(profile_to_toml(prof, "header"))
    back = get_profile(str(path))
    assert back == prof and back.calibrated and back.provenance["defaulted"] == prof.provenance["defaulted"]
    for field in COSTS:
        assert getattr(sections_to_costs(back), field) == pytest.approx(getattr(fit.costs, field), rel=1e-3)
    assert back.engine.max_num_seqs == 3


def test_profile_file_errors_are_one_clear_line(tmp_path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("name = [")
    with pytest.raises(ProfileError, match="not valid TOML"):
        load_profile_file(bad)
    with pytest.raises(ProfileError, match="no profile file"):
        get_profile(str(tmp_path / "missing.toml"))
    partial = tmp_path / "partial.toml"
    partial.write_text('name = "x"\ndescription = "d"\n')
    with pytest.raises(ProfileError, match="missing or unknown field"):
        load_profile_file(partial)


def test_the_calibrated_profile_predicts_held_out_loads() -> None:
    src = get_profile().with_overrides(engine={"max_num_seqs": 3})
    fit = fit_engine(_short_sweep(src))
    prof = calibrated_profile(fit, "mine", "m", fit_provenance(fit))
    closed = VirtualLoad(parse_length("512"), parse_length("32"), concurrency=8, requests=48)
    rows = predict(prof, _measured(src, "c=8", closed), seeds=2)
    assert {(r.metric, r.percentile) for r in rows} == {
        (m, p) for m in ("ttft", "tpot", "e2e") for p in (50, 95)
    }
    for r in rows:  # the same sends, the same lengths: only the model can differ
        assert abs(r.rel_error) < 0.05, r
    # Open loop: replayed as sent (same requests, same send times), so again only the model differs.
    poisson = VirtualLoad(
        parse_length("256:768"), parse_length("32"), rates=(6.0,), step_duration_s=30, seed=7
    )
    for r in predict(prof, _measured(src, "6/s", poisson), seeds=2):
        assert r.inside and abs(r.rel_error) < 0.05, r


def test_replicas_split_the_load_and_keep_its_throughput() -> None:
    src = get_profile().with_overrides(engine={"max_num_seqs": 2})
    load = VirtualLoad(parse_length("256"), parse_length("16"), concurrency=8, requests=40)
    one = run_replicated(load, src, src.network, 1)
    four = run_replicated(load, src, src.network, 4)
    assert len(one) == len(four) == 40
    assert sorted(r.index for r in four) == list(range(40))
    # Two slots for eight users queue; four replicas of two slots do not: TTFT drops.
    assert max(r.ttft for r in four) < min(sorted(r.ttft for r in one)[20:])
