"""The oracle: a real GPU engine's records (tests/data/engines/h200/: Hugging Face `transformers serve`
with continuous batching on an H200, see its README). Calibrated from its ladder and concurrency sweep
and validated on its held-out loads, the tool must never tell the user something false: a fit that
does not describe the engine is refused, no row whose error passes the tolerance is met, no met row's
interval is wider than the tolerance, and the profile does not hold while its rows miss."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from tokenpace.app.calibration.calibrate import calibrate
from tokenpace.app.calibration.validate import validate
from tokenpace.testing.procs import run_cli

DATA = Path(__file__).resolve().parents[2] / "data" / "engines" / "h200"
TOLERANCE = 0.10


@pytest.fixture(scope="module")
def gpu(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("h200")
    for f in DATA.iterdir():
        shutil.copy(f, d / f.name)
    return d


@pytest.fixture(scope="module")
def forced(gpu: Path):
    return calibrate([str(gpu / "ladder.json"), str(gpu / "conc.json")], str(gpu / "h200.toml"), force=True)


def test_the_calibration_names_the_behaviours_and_where_the_engine_moved(gpu: Path) -> None:
    """The line misfit (42 % RMS) came from the 64-user step, during which the engine moved (98 ms a
    token, then 33, then 68): named with its size and left out; each step's first slow wave is a
    warm-up, trimmed; the floor is chosen by held-out error; the per-token gaps say prefills mix."""
    out = gpu / "moved.toml"
    done = run_cli("sim", "--calibrate", str(gpu / "ladder.json"), "--calibrate", str(gpu / "conc.json"),
                   "--out", str(out))  # fmt: skip
    assert done.returncode == 0 and out.exists(), done.stdout + done.stderr
    assert re.search(
        r"^engine moved: the engine moved within c=64 in=256: .* decoded \+2\d\d%", done.stdout, re.M
    )
    assert re.search(r"^where it holds: warm-up at c=16 in=256: its first 16 requests", done.stdout, re.M)
    law = re.search(
        r"^behaviour: step law: floor \(held-out error .* line (\d+\.\d)%, floor (\d+\.\d)%",
        done.stdout,
        re.M,
    )
    assert law and float(law[2]) < 0.67 * float(law[1]), done.stdout
    assert re.search(r"^behaviour: scheduler: prefills mixed into decode steps", done.stdout, re.M)
    text = out.read_text()
    floor = float(re.search(r"step_floor_ms = ([\d.]+)", text)[1])  # type: ignore[index]
    assert 20 < floor < 25 and "chunked_prefill = true" in text
    assert "Traceback" not in done.stderr


def test_it_says_what_it_could_not_identify(forced, gpu: Path) -> None:
    assert forced.written and not forced.problems  # the loads left after the move fit within the gate
    assert "fit_quality" in (gpu / "h200.toml").read_text()
    # 64 users were the most it saw: the slot limit is not identified, and says how to get it
    limit = next(p for p in forced.fit.params if p.name == "max_num_seqs")
    assert not limit.identified and "--max-num-seqs" in limit.how


def test_validation_on_the_held_out_loads_never_claims_more_than_its_evidence(forced, gpu: Path) -> None:
    result = validate(forced.profile, [str(gpu / "held.json"), str(gpu / "rate.json")], TOLERANCE)
    assert len(result.rows) == 18
    for row in result.rows:
        p, v = row.prediction, row.judged
        if v.verdict == "met":
            assert abs(p.rel_error) <= TOLERANCE, (p.load, p.metric)
            assert v.high_error - v.low_error <= 2 * TOLERANCE, (p.load, p.metric)
        if v.verdict == "missed":  # the whole interval beyond the tolerance
            assert v.low_error > TOLERANCE or v.high_error < -TOLERANCE
    # The engine did not hold still: no row is a confident miss, each says why, with the move's size.
    assert result.verdict == "undecided" and result.exit_code == 2
    assert not [r for r in result.rows if r.judged.verdict == "missed"]
    by_load = {r.prediction.load: r for r in result.rows}
    assert set(by_load) == {"c=32 in=256", "c=128 in=256", "17.05/s in=256"}
    for row in result.rows:
        reason = row.judged.reason
        if row.prediction.load.startswith("c=32"):
            assert re.search(r"engine moved \+\d+% within this load \(surely \+\d+%\)", reason)
        if row.prediction.load.startswith("c=128"):  # past the 64 it saw, and moved within itself
            assert "in flight" in reason and "within this load" in reason
        if row.prediction.load.startswith("17.05"):  # held still itself; the calibration's engine moved
            assert re.search(r"the engine's own speed moved \d+% or more during the calibration", reason)
    # The acceptance where the engine held still between its waves: the 32-user loop's P50s within 15 %
    # (its rows are undecided all the same: the load moved within itself).
    for row in result.rows:
        p = row.prediction
        if p.load.startswith("c=32") and p.percentile == 50:
            assert abs(p.rel_error) <= 0.15, (p.metric, p.rel_error)


def test_the_console_and_the_json_say_the_same(forced, gpu: Path) -> None:
    out = gpu / "validation.json"
    held = [str(gpu / "held.json"), str(gpu / "rate.json")]
    done = run_cli("sim", "--validate", str(gpu / "h200.toml"), *held, "--out", str(out))
    doc = json.loads(out.read_text())
    assert done.returncode == 2 and doc["verdict"] == "undecided"
    assert re.search(r"^profile h200: UNDECIDED \(rows: 0 met, 0 missed", done.stdout, re.M), done.stdout
    for load, verdict in doc["loads"].items():
        assert f"load {load}: {verdict.upper()}" in done.stdout
    assert sum(r["verdict"] == "missed" for r in doc["rows"]) == sum(
        1 for ln in done.stdout.splitlines() if ln.rstrip().endswith("beyond 10%)") and " missed " in ln
    )


def test_unusable_steps_are_refused_by_name(gpu: Path) -> None:
    conc = json.loads((gpu / "conc.json").read_text())
    conc["steps"][3]["valid"] = False
    conc["steps"][3]["summary"].setdefault("client", {})["valid"] = False
    conc["steps"][2]["interrupted"] = True
    bad = gpu / "conc_bad.json"
    bad.write_text(json.dumps(conc))
    done = calibrate([str(gpu / "ladder.json"), str(bad)], str(gpu / "bad.toml"), force=True)
    assert any("step 4 (c=64 in=256) refused: client NOT VALID" in r for r in done.refused), done.refused
    assert any("step 3 (c=16 in=256) refused: interrupted" in r for r in done.refused), done.refused
    assert done.profile.provenance["refused"] == list(done.refused)
