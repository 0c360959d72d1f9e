"""What a calibration identifies must agree with its own data, and what it could not identify travels
with the profile: a 6-slot engine swept at 1, 2 and 4 users (the docs' old recipe) with one misleading
scrape of the server's gauge; predictions past what it saw are undecided in --virtual, plan and select.
And a server that does not behave like an engine gets a clear answer, never a traceback."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import pytest

from tokenpace.core.analysis.calibration.engine_fit import fit_engine
from tokenpace.core.analysis.calibration.engine_obs import MeasuredLoad
from tokenpace.core.analysis.capacity.loadpoint import point_from_result
from tokenpace.core.analysis.selection.select import run_point
from tokenpace.core.record import RequestRecord
from tokenpace.core.workload.lengths import parse_length
from tokenpace.sim.profiles.calibrated import calibrated_profile, fit_provenance
from tokenpace.sim.profiles.limits import Offered, limits_of, share_at_least
from tokenpace.sim.profiles.profile import get_network, get_profile
from tokenpace.sim.virtual_time.predicted_sweep import predicted_sweep_doc
from tokenpace.sim.virtual_time.virtual import run_virtual
from tokenpace.sim.virtual_time.virtual_load import VirtualLoad

SLOTS = 6


def _sweep() -> list[MeasuredLoad]:
    src = get_profile("llama-3.1-8b-h100").with_overrides(engine={"max_num_seqs": SLOTS})
    out = []
    for n in (16, 128, 512, 1024):
        load = VirtualLoad(parse_length(str(n)), parse_length("32"), concurrency=1, requests=8)
        records = tuple(r.record for r in run_virtual(load, src))
        out.append(MeasuredLoad(f"c=1 in={n}", records, concurrency=1))
    for c in (1, 2, 4):
        load = VirtualLoad(parse_length("256"), parse_length("32"), concurrency=c, requests=40)
        out.append(MeasuredLoad(f"c={c}", tuple(r.record for r in run_virtual(load, src)), concurrency=c))
    return out


@pytest.fixture(scope="module")
def profile():
    loads = _sweep()
    # one scrape caught a request in its admission: 1 running while 1 waited
    loads[-1] = replace(loads[-1], server_running_when_waiting=(1.0,))
    fit = fit_engine(loads)
    limit = next(p for p in fit.params if p.name == "max_num_seqs")
    assert not limit.identified  # 4 users all decoding at once: a limit of 6 was never reached
    assert fit.max_num_seqs >= 4  # never below the largest batch the data showed
    assert "not the slot limit" in limit.how and "--max-num-seqs" in limit.how
    return calibrated_profile(fit, "six", "m", fit_provenance(fit))


def test_a_gauge_seen_often_enough_and_no_lower_than_the_data_is_the_limit() -> None:
    loads = _sweep()
    loads[-1] = replace(loads[-1], server_running_when_waiting=(6.0, 6.0, 6.0, 5.0))
    limit = next(p for p in fit_engine(loads).params if p.name == "max_num_seqs")
    assert limit.identified and limit.value == 6 and "3 scrapes" in limit.how
    loads[-1] = replace(loads[-1], server_running_when_waiting=(6.0, 5.0))  # one scrape at 6: not enough
    assert not next(p for p in fit_engine(loads).params if p.name == "max_num_seqs").identified


def test_predictions_past_what_the_calibration_saw_are_undecided_everywhere(profile) -> None:
    limits = limits_of(profile)
    assert not limits.slot_limit_identified
    assert any("slot limit not identified" in c for c in limits.caveats())
    assert limits.beyond(4, 256) == ""  # what it saw
    assert "sweep past it or pass --max-num-seqs" in limits.beyond(10, 256)
    load = VirtualLoad(parse_length("256"), parse_length("32"), concurrency=10, requests=60)
    doc = predicted_sweep_doc(load, profile, get_network("local"), [run_virtual(load, profile)])
    step = doc["steps"][0]
    assert "10 in flight" in step["beyond_profile"]
    assert doc["predicted"]["caveats"]
    # plan leaves the step out with the reason; select never judges it (no PASS PREDICTED)
    assert any("past what its profile vouches for" in r for r in point_from_result(1, step).left_out_reasons)
    assert "past what its profile vouches for" in run_point("p#1", step).left_out


def test_an_open_loop_is_judged_on_the_load_it_offers_not_on_the_models_own_queue(profile) -> None:
    """Arrivals in an open loop come in bursts: Poisson counts in flight (more spread for burstier
    arrivals). A load whose arrivals find the calibration's 4 at once already in flight more than
    1 % of the time is past it, whatever the model's own mean count says."""
    assert share_at_least(1.0, 4) == pytest.approx(0.01899, abs=1e-4)  # Poisson(1): P(N >= 4)
    assert share_at_least(1.0, 4, dispersion=3.0) > share_at_least(1.0, 4) > share_at_least(0.5, 4)
    assert share_at_least(float("inf"), 4) == 1.0 and share_at_least(2.0, 0) == 1.0
    limits = limits_of(profile)
    assert limits.offered_beyond(Offered(1.0, 0.27)) == ""  # 0.27 in flight: 0.02 % find 4
    why = limits.offered_beyond(Offered(5.0, 0.27))  # 1.35 in flight: 5 % find 4 or more
    assert why.startswith("offered load past what the calibration saw") and "--max-num-seqs" in why
    assert "prefills alone" in limits.offered_beyond(Offered(100.0, float("inf")))
    assert limits.beyond(1.35, 256, offered=Offered(5.0, 0.27)) == why  # said once, by the load offered
    told = replace(profile, provenance={**profile.provenance, "defaulted": {}})  # a limit identified
    assert limits_of(told).offered_beyond(Offered(5.0, 0.27)) == ""


def test_a_fit_that_failed_its_gate_vouches_for_nothing(profile) -> None:
    marked = replace(profile, provenance={**profile.provenance, "fit_quality": {"problems": ["misfits"]}})
    assert "does not describe this engine" in limits_of(marked).beyond(1, 16)


def _constant_server() -> list[MeasuredLoad]:
    """A server whose TTFT shrinks a little with the prompt and whose tokens come at a fixed pace,
    whatever the batch: nothing like an engine."""
    loads = []
    t = 0
    for n in (16, 128, 512, 1024):
        records = []
        for i in range(8):
            first = t + 50_000_000 - n * 1_000
            tokens = [first + k * 10_000_000 for k in range(16)]
            records.append(
                RequestRecord(
                    request_id=f"{n}-{i}", index=i, sent_ns=t, first_token_ns=first, end_ns=tokens[-1],
                    token_ns=tokens, output_tokens_server=16, prompt_tokens=n,
                )
            )  # fmt: skip
            t = tokens[-1] + 1_000_000
        loads.append(MeasuredLoad(f"c=1 in={n}", tuple(records), concurrency=1))
    return loads


def test_a_server_that_does_not_prefill_like_an_engine_gets_an_answer_not_a_traceback() -> None:
    fit = fit_engine(_constant_server())
    prefill = next(p for p in fit.params if p.name == "prefill_per_token")
    assert not prefill.identified and "did not grow with the prompt" in prefill.how


def test_sim_virtual_says_which_steps_it_cannot_vouch_for(profile, tmp_path) -> None:
    from tokenpace.sim.profiles.profile_file import profile_to_toml
    from tokenpace.testing.procs import run_cli

    path = tmp_path / "six.toml"
    path.write_text(profile_to_toml(profile, "test"))
    sweep = tmp_path / "pred.json"
    done = run_cli("sim", "--virtual", "--profile", str(path), "--rate", "1,40", "--duration", "30s",
                   "--input-len", "256", "--output-len", "32", "--predicted-sweep", str(sweep))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "profile: slot limit not identified" in done.stdout
    assert re.search(r"^step 40/s: UNDECIDED, predicted past what the profile vouches for", done.stdout, re.M)
    assert not re.search(r"^step 1/s: UNDECIDED", done.stdout, re.M)
    plan = run_cli("plan", str(sweep), "--out", str(tmp_path / "plan.json"))
    assert "past what its profile vouches for" in plan.stdout, plan.stdout
    assert "Caveat (every figure): slot limit not identified" in plan.stdout  # the profile's, said
    # the maximum read at 1 req/s is a lower bound: 40 req/s, left out, lies above it
    assert re.search(
        r"at least [\d.]+ req/s .*between 1 and 40 req/s \(step 2 was not sustained: left out", plan.stdout
    ), plan.stdout
    doc = json.loads((tmp_path / "plan.json").read_text())
    assert any("slot limit not identified" in c for c in doc["plan"]["caveats"])
    assert doc["analysis"]["max_sustainable"]["true_max_below_rps"] == 40
