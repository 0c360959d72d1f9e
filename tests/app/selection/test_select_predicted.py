"""`select` takes a predicted sweep (`sim --virtual --predicted-sweep`) as a candidate: judged by the
measured rules (upper bounds, open-loop steps for a rate, the next step at or above, attainment),
its intervals widened by the calibration's fit error, marked predicted, and never the recommendation."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import orjson
import pytest

from tokenpace.adapters.store import Store, StoreError, connect
from tokenpace.app.selection.select import SelectConfig, needs_store, run_select
from tokenpace.core.analysis.selection.scenarios import Prices, ScenarioError
from tokenpace.core.metrics import summarize
from tokenpace.core.workload.lengths import parse_length
from tokenpace.sim import VirtualLoad, get_profile, run_virtual
from tokenpace.sim.virtual_time.predicted_sweep import predicted_sweep_doc

PROFILE = "llama-3.1-8b-h100"


def _load(rates: tuple[float, ...], seed: int = 0) -> VirtualLoad:
    return VirtualLoad(
        input_len=parse_length("512"),
        output_len=parse_length("16"),
        rates=rates,
        step_duration_s=60,
        seed=seed,
    )


def _predicted(tmp_path: Path, fit_error: float = 0.0, rates: tuple[float, ...] = (2.0, 4.0)) -> str:
    load, profile = _load(rates), get_profile(PROFILE)
    results = run_virtual(load, profile)
    steps = [[r for r in results if r.step == k] for k in range(len(rates))]
    doc = predicted_sweep_doc(load, profile, profile.network, steps)
    doc["predicted"]["fit_error"] = fit_error  # as a calibrated profile's residual would set it
    path = tmp_path / f"predicted-{fit_error}.json"
    path.write_bytes(orjson.dumps(doc))
    return str(path)


def _scenarios(tmp_path: Path, ttft_p95_ms: float = 2000.0) -> Path:
    lines = f'slo = [{{ metric = "ttft", percentile = "p95", threshold_ms = {ttft_p95_ms} }}]'
    text = "\n".join(
        [
            "[scenario.fast]\ninput_len = 512\noutput_len = 16\nrate = 4\nattainment = 0.9",
            lines,
            "[scenario.beyond]\ninput_len = 512\noutput_len = 16\nrate = 8",
            lines,
            "[scenario.users]\ninput_len = 512\noutput_len = 16\nconcurrency = 4",
            lines,
        ]
    )
    path = tmp_path / f"scenarios-{ttft_p95_ms}.toml"
    path.write_text(text + "\n", encoding="utf-8")
    return path


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return connect(str(tmp_path / "runs.db"))


def test_a_predicted_pass_is_judged_marked_and_never_recommended(tmp_path, store):
    pred = _predicted(tmp_path)
    step = orjson.loads(Path(pred).read_bytes())["steps"][1]
    assert len(step["sample"]["ttft_ms"]) == step["summary"]["counts"]["sent"] > 100  # under the cap: all
    report = run_select(store, SelectConfig("fast", [pred], scenarios_file=_scenarios(tmp_path)))
    (verdict,) = report.verdicts
    assert verdict.kind == "predicted" and verdict.status == "pass"
    assert "#2 at 4 req/s" in verdict.placement.where  # its own 4 req/s step, open loop
    attainment = next(c for c in verdict.cells if c.line.startswith("attainment"))
    assert attainment.status == "pass" and attainment.value is not None and attainment.value >= 0.9
    doc = report.to_dict()
    assert doc["candidates"][0]["predicted"].startswith("PREDICTED by the simulator")
    assert doc["recommendation"]["candidate"] is None  # nothing measured: nothing recommended
    assert "no measured candidate" in doc["recommendation"]["reason"]
    pick = doc["predicted_recommendation"]
    assert pick["candidate"] == pred and pick["basis"] == "PREDICTED"
    assert "not a measured one" in pick["note"]


def test_a_predicted_sweep_is_placed_as_a_measured_one(tmp_path, store):
    pred = _predicted(tmp_path)
    scenarios = _scenarios(tmp_path)
    beyond = run_select(store, SelectConfig("beyond", [pred], scenarios_file=scenarios)).verdicts[0]
    assert beyond.status == "unknown" and "measure it" in beyond.placement.where
    users = run_select(store, SelectConfig("users", [pred], scenarios_file=scenarios)).verdicts[0]
    assert users.status == "unknown" and "not enough evidence" in users.placement.where


def test_the_fit_error_widens_the_bound_that_decides(tmp_path, store):
    exact = _predicted(tmp_path, fit_error=0.0)
    cfg = SelectConfig("fast", [exact], scenarios_file=_scenarios(tmp_path))
    upper = run_select(store, cfg).verdicts[0].cells[0].upper
    assert upper is not None
    # a line 10 % over the sampling bound: the exact model passes it; with a 10 % fit error the bound
    # grows by 20 % and the same prediction no longer proves it
    scenarios = _scenarios(tmp_path, ttft_p95_ms=round(upper * 1.1, 3))
    assert (
        run_select(store, SelectConfig("fast", [exact], scenarios_file=scenarios)).verdicts[0].status
        == "pass"
    )
    loose = _predicted(tmp_path, fit_error=0.1)
    widened = run_select(store, SelectConfig("fast", [loose], scenarios_file=scenarios)).verdicts[0]
    assert widened.cells[0].status == "undecided"  # meets on its estimate only
    assert widened.cells[0].upper == pytest.approx(upper * 1.2)


def _measured(store: Store) -> None:
    """A run stored as a measurement (made on the virtual clock here) at the scenario's load."""
    records = [r.record for r in run_virtual(_load((4.0,), seed=1), get_profile(PROFILE))]
    conditions = {
        "model": "m",
        "load": {"mode": "open_loop", "rate": 4.0, "concurrency": None, "arrival": "poisson"},
        "workload": {"input_len": {"spec": "512"}, "output_len": {"spec": "16"}},
    }
    summary = summarize(records, open_loop=True).to_dict()
    store.save_run("meas00000001", conditions, summary, records, labels={"candidate": "measured"})


def test_a_cheaper_predicted_candidate_is_said_apart_from_the_measured_recommendation(tmp_path, store):
    _measured(store)
    pred = _predicted(tmp_path)
    prices = {"candidate=measured": Prices(1.0, 1.0), pred: Prices(0.1, 0.1)}
    cfg = SelectConfig(
        "fast", ["candidate=measured", pred], scenarios_file=_scenarios(tmp_path), prices=prices
    )
    report = run_select(store, cfg)
    assert [v.status for v in report.verdicts] == ["pass", "pass"]
    assert report.recommendation.candidate == "candidate=measured"
    assert report.predicted_pick is not None and report.predicted_pick.candidate == pred
    with pytest.raises(ScenarioError, match="is predicted"):
        run_select(store, dataclasses.replace(cfg, route_small=pred))


def test_predicted_files_alone_need_no_store(tmp_path):
    pred = _predicted(tmp_path)
    assert not needs_store([pred], [])
    assert needs_store([pred, "candidate=measured"], []) and needs_store([pred], ["candidate=x"])
    report = run_select(None, SelectConfig("fast", [pred], scenarios_file=_scenarios(tmp_path)))
    assert report.verdicts[0].status == "pass"
    with pytest.raises(StoreError, match="need the store"):
        run_select(
            None, SelectConfig("fast", [pred, "candidate=measured"], scenarios_file=_scenarios(tmp_path))
        )
