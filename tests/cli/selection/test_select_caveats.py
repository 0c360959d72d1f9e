"""A profile whose slot limit was defaulted (an engine of 6 slots calibrated at 1, 2 and 4 users: it
saw 4 at once and no limit) predicts an open loop past what its calibration saw: `select` never says
PASS PREDICTED there, where the engine itself fails the line, but undecided with the reason, and the
profile's caveat is in its console output and its JSON. Within what it saw, it still judges."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import orjson
import pytest

from tokenpace.core.analysis.calibration.engine_fit import fit_engine
from tokenpace.core.analysis.calibration.engine_obs import MeasuredLoad
from tokenpace.core.metrics import ttft_ns
from tokenpace.core.workload.lengths import parse_length
from tokenpace.sim.profiles.calibrated import calibrated_profile, fit_provenance
from tokenpace.sim.profiles.limits import limits_of
from tokenpace.sim.profiles.profile import Profile, get_network, get_profile
from tokenpace.sim.virtual_time.predicted_sweep import predicted_sweep_doc
from tokenpace.sim.virtual_time.virtual import run_virtual
from tokenpace.sim.virtual_time.virtual_load import VirtualLoad
from tokenpace.testing.procs import run_cli

SLOTS = 6
RATES = (2.0, 12.0)
LINE_MS = 30.0  # TTFT P95: the model's 12 req/s meets it, the 6-slot engine's does not


def _engine() -> Profile:
    return get_profile("llama-3.1-8b-h100").with_overrides(engine={"max_num_seqs": SLOTS})


def _calibrated() -> Profile:
    loads = []
    for n in (16, 128, 512, 1024):
        load = VirtualLoad(parse_length(str(n)), parse_length("32"), concurrency=1, requests=8)
        loads.append(MeasuredLoad(f"c=1 in={n}", tuple(r.record for r in run_virtual(load, _engine()))))
    for c in (1, 2, 4):
        load = VirtualLoad(parse_length("256"), parse_length("32"), concurrency=c, requests=40)
        records = tuple(r.record for r in run_virtual(load, _engine()))
        loads.append(MeasuredLoad(f"c={c}", records, concurrency=c))
    fit = fit_engine(loads)
    return calibrated_profile(fit, "six", "m", fit_provenance(fit))


def _load(seed: int) -> VirtualLoad:
    return VirtualLoad(parse_length("256"), parse_length("32"), rates=RATES, step_duration_s=60, seed=seed)


def _ttft_p95(profile: Profile, seed: int, step: int) -> float:
    results = run_virtual(_load(seed), profile)
    return float(np.percentile([ttft_ns(r.record) for r in results if r.step == step], 95)) / 1e6


@pytest.fixture(scope="module")
def case(tmp_path_factory) -> dict[str, object]:
    folder = tmp_path_factory.mktemp("caveats")
    profile = _calibrated()
    assert not limits_of(profile).slot_limit_identified
    results = run_virtual(_load(0), profile)
    steps = [[r for r in results if r.step == k] for k in range(len(RATES))]
    pred = folder / "pred.json"
    pred.write_bytes(orjson.dumps(predicted_sweep_doc(_load(0), profile, get_network("local"), steps)))
    line = f'slo = [{{ metric = "ttft", percentile = "p95", threshold_ms = {LINE_MS} }}]'
    scenarios = folder / "scenarios.toml"
    scenarios.write_text(
        f"[scenario.busy]\ninput_len = 256\noutput_len = 32\nrate = 12\n{line}\n"
        f"[scenario.quiet]\ninput_len = 256\noutput_len = 32\nrate = 2\n{line}\n",
        encoding="utf-8",
    )
    return {"profile": profile, "pred": str(pred), "scenarios": str(scenarios)}


def _select(case: dict[str, object], scenario: str, *extra: str) -> str:
    done = run_cli(
        "select", "--scenario", scenario, "--scenarios", str(case["scenarios"]), str(case["pred"]), *extra
    )
    assert done.returncode == 5, done.stderr  # a prediction alone never passes: undecided
    return done.stdout


def test_the_engine_fails_the_line_where_the_model_meets_it(case) -> None:
    """What makes the case: the model without the engine's slot limit meets the line at 12 req/s,
    the engine does not, and the prediction's own count in flight (rate x its mean E2E) stays under
    what the calibration saw, so the old test let it through."""
    profile = case["profile"]
    assert isinstance(profile, Profile)
    for seed in (0, 1):
        assert _ttft_p95(profile, seed, 1) < LINE_MS < _ttft_p95(_engine(), seed, 1)
    step = json.loads(Path(str(case["pred"])).read_text())["steps"][1]
    mean_in_flight = RATES[1] * step["summary"]["e2e_ms"]["mean"] / 1e3
    assert limits_of(profile).beyond(mean_in_flight, 256) == ""


def test_select_never_passes_a_load_past_the_calibration_and_says_why(case, tmp_path) -> None:
    out = _select(case, "busy", "--html", str(tmp_path / "select.html"))
    assert "caveat: slot limit not identified" in (tmp_path / "select.html").read_text()
    assert "PASS" not in out
    assert "UNDECIDED PREDICTED" in out
    assert "offered load past what the calibration saw" in out
    assert "caveat: slot limit not identified" in out
    doc = json.loads(_select(case, "busy", "--json"))
    (cand,) = doc["candidates"]
    assert cand["status"] == "undecided"
    assert all(c["status"] == "undecided" for c in cand["cells"])
    assert "offered load past what the calibration saw" in cand["cells"][0]["reason"]
    assert any("slot limit not identified" in c for c in cand["caveats"])
    assert doc["predicted_recommendation"] is None


def test_within_what_the_calibration_saw_it_still_judges(case) -> None:
    doc = json.loads(_select(case, "quiet", "--json"))
    (cand,) = doc["candidates"]
    assert cand["status"] == "pass"  # 2 req/s: the engine's slots are never all taken
    assert any("slot limit not identified" in c for c in cand["caveats"])  # said all the same
