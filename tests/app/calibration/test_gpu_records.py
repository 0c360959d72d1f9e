"""The oracle: a real GPU engine's records (tests/data/engines/h200/: Hugging Face `transformers serve`
with continuous batching on an H200, see its README). Calibrated from its ladder and concurrency sweep
and validated on its held-out loads, the tool must never tell the user something false: a fit that
does not describe the engine is refused, no row whose error passes the tolerance is met, no met row's
interval is wider than the tolerance, and the profile does not hold while its rows miss."""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import replace
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


def test_the_calibration_says_which_behaviours_the_sweep_supports(gpu: Path) -> None:
    """The 64-user step went back to a slow speed after running fast (two cycles of users fast between
    slow ones), and six more of the sweep's eight loads were slow in their first waves (a warm-up at
    the slow speed): two speeds, the step law fitted to the fast waves (without them it predicts the
    loads it did not see 4x closer than a floor) and the slow speed's step apart, carried by the
    profile as what it adds; kept because over the same requests it misfits the decode step 5x less
    than one speed. The per-token gaps a newcomer spans say prefills mix into decode steps; the steps
    rebuilt from the token times say a step's attention runs over the whole packed step (a group of
    newcomers costs more the more requests decode beside it)."""
    out = gpu / "fit.toml"
    done = run_cli("sim", "--calibrate", str(gpu / "ladder.json"), "--calibrate", str(gpu / "conc.json"),
                   "--out", str(out))  # fmt: skip
    assert done.returncode == 0 and out.exists(), done.stdout + done.stderr
    two = re.search(
        r"^behaviour: two speeds: (\d+) of (\d+) waves in (\d+) loads decoded at a slow speed.* the slow one "
        r"from them \((\d+\.?\d*) ms at batch 1", done.stdout, re.M
    )  # fmt: skip
    assert two and int(two[3]) >= 2 and 0 < int(two[1]) < int(two[2]), done.stdout
    assert 60 <= float(two[4]) <= 110  # the slow waves: 59-121 ms a token alone, ~100 at 64 users
    assert "c=64 in=256 went back to it after running fast" in done.stdout
    support = re.search(
        r"Kept: over the same requests the two speeds misfit the decode step at (\S+)% RMS, one speed at "
        r"(\S+)%",
        done.stdout,
    )
    assert support and float(support[1]) < 15 < 40 < float(support[2]), done.stdout  # 10.3 % against 54.1 %
    law = re.search(r"^behaviour: step law: line \(held-out error .* line (\d+\.\d)%, floor (\d+\.\d)%",
                    done.stdout, re.M)  # fmt: skip
    assert law and float(law[1]) < 15 < float(law[2]), done.stdout
    assert re.search(r"^behaviour: scheduler: prefills mixed into decode steps", done.stdout, re.M)
    packed = re.search(r"^behaviour: attention: packed over the whole step .* is (\S+) ms RMS packed, "
                       r"(\S+) ms per-sequence", done.stdout, re.M)  # fmt: skip
    assert packed and float(packed[1]) < 0.75 * float(packed[2]), done.stdout  # 20.5 against 47.2 ms
    text = out.read_text()
    pair = re.search(r"^packed_pair_ns = (\S+)", text, re.M)
    assert pair and 0.5 < float(pair[1]) < 1.5, text  # 0.87 ns a pair
    assert "chunked_prefill = true" in text and "step_floor_ms = 0.0" in text
    extra = re.search(r"^slow_step_extra_ms = (\S+)", text, re.M)
    assert extra and 40 < float(extra[1]) < 90, text  # ~20 ms a step fast, ~80 slow
    assert "Traceback" not in done.stderr


def test_it_says_what_it_could_not_identify(forced, gpu: Path) -> None:
    assert forced.written and not forced.problems  # the warm-up trimmed, the line fits within the gate
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
    # 128 users: more in flight than the calibration ever saw, with no slot limit identified
    past = [r for r in result.rows if r.prediction.load.startswith("c=128")]
    assert past and all(r.judged.verdict == "undecided" and "in flight" in r.judged.reason for r in past)
    assert result.loads["c=128 in=256"] == "undecided"
    # no row missed: each load is judged at the speed its waves ran at (the 32-user loop switched)
    assert not [r for r in result.rows if r.judged.verdict == "missed"]
    assert result.speeds == {"c=32 in=256": "both", "c=128 in=256": "slow", "17.05/s in=256": "slow"}
    assert result.verdict == "undecided" and result.exit_code == 5
    # each load judged at the level it ran: the caveat says so, not "the fast speed's predictions"
    assert any("judged on its later requests sent after its first third ended" in c for c in result.caveats)
    assert not any("fast speed's predictions" in c for c in result.caveats), result.caveats


def test_the_held_out_loads_that_held_one_speed_are_predicted_at_the_level_they_ran(
    forced, gpu: Path
) -> None:
    """Issue 39's acceptance: the Poisson load's P50s within 25 %, the 128 users' within 15 %. Both ran
    at the slow speed throughout, which no load parameter predicts, and at different levels of it
    (+50 and +65 ms a step over the fast law): each is judged, at the level its first third ran, on the
    requests sent after that third had ended (none decoded beside a request that set the level). The
    fast speed alone missed the Poisson load by 54-69 %; 128 users' newcomers wait on steps that pay
    for every pair of the packed step (the per-sequence model's TTFT was -25 %)."""
    result = validate(forced.profile, [str(gpu / "held.json"), str(gpu / "rate.json")], TOLERANCE)
    p50 = {(r.prediction.load, r.prediction.metric): r.prediction for r in result.rows
           if r.prediction.percentile == 50}  # fmt: skip
    for metric in ("ttft", "tpot", "e2e"):
        assert abs(p50["17.05/s in=256", metric].rel_error) <= 0.25, (metric, p50["17.05/s in=256", metric])
        assert abs(p50["c=128 in=256", metric].rel_error) <= 0.15, (metric, p50["c=128 in=256", metric])
    for load, judged in (("17.05/s in=256", 87), ("c=128 in=256", 109)):
        why = next(n for n in result.notes[load] if n.startswith("judged on its"))
        said = rf"judged on its {judged} requests sent after its first \d+ ended, at the level those ran: "
        level = re.search(said + r"\+([\d.]+) ms", why)
        assert level and 30 < float(level[1]) < 90, why  # between the fast (0) and beyond half the slow (+62)
    fast_only = replace(forced.profile, efficiency=replace(forced.profile.efficiency, slow_step_extra_ms=0.0,
                                                           slow_per_seq_extra_us=0.0))  # fmt: skip
    one = validate(fast_only, [str(gpu / "rate.json")], TOLERANCE)
    assert one.loads["17.05/s in=256"] == "missed" and one.speeds == {"17.05/s in=256": "one"}


def test_the_slow_speed_runs_on_request(forced, gpu: Path) -> None:
    """`sim --speed slow` runs the calibrated engine at its slow speed, and says which it runs."""
    runs = {}
    for speed in ("fast", "slow"):
        out = gpu / f"virtual-{speed}.json"
        done = run_cli("sim", "--profile", str(gpu / "h200.toml"), "--speed", speed, "--virtual",
                       "--requests", "16", "--concurrency", "4", "--out", str(out))  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        assert f"these are the {speed} speed's predictions" in done.stdout
        runs[speed] = json.loads(out.read_text())["steps"][0]["tpot_ms"]["p50"]
    assert runs["slow"] > 3 * runs["fast"]
    done = run_cli("sim", "--speed", "slow", "--virtual", "--requests", "4")
    assert done.returncode == 2 and "has one speed" in done.stderr and "Traceback" not in done.stderr
    done = run_cli("sim", "--validate", str(gpu / "h200.toml"), str(gpu / "rate.json"), "--speed", "slow")
    assert done.returncode == 2 and "drop --speed" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize("value", ["-100.0", '"fast"', "nan", "true"])
def test_a_slow_speed_that_is_no_cost_is_refused_by_name(forced, gpu: Path, value: str) -> None:
    """A profile edited by hand: a slow speed faster than nothing, a word, not a number, is refused with
    the field's name, not run (nor a traceback)."""
    bad = gpu / "bad-slow.toml"
    text = (gpu / "h200.toml").read_text()
    bad.write_text(re.sub(r"^slow_step_extra_ms = .*$", f"slow_step_extra_ms = {value}", text, flags=re.M))
    done = run_cli("sim", "--profile", str(bad), "--speed", "slow", "--virtual", "--requests", "4")
    assert done.returncode == 2 and "efficiency.slow_step_extra_ms" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def test_the_32_user_loop_is_a_decided_move_with_its_size(forced, gpu: Path) -> None:
    """Its waves decoded at two speeds, back and forth (a slow cycle of users, four fast, a slow one
    again: 94 against 22 ms a token, every slow wave 3.6x or more the slowest fast one): the load
    measured an engine that did not hold still, so no row of it is met or missed, each says so with the
    size (issue 39's acceptance: within 15 %, or a decided "engine moved" with its size)."""
    result = validate(forced.profile, [str(gpu / "held.json")], TOLERANCE)
    rows = [r for r in result.rows if r.prediction.load == "c=32 in=256"]
    assert len(rows) == 6
    for row in rows:
        v = row.judged
        assert v.verdict == "undecided", (row.prediction.metric, v)
        size = re.search(r"engine moved within this load: 6 of 18 waves decoded \+(\d+)% slower than the "
                         r"rest \(surely \+(\d+)%\)", v.reason)  # fmt: skip
        assert size and int(size[2]) >= 200 and int(size[1]) > int(size[2]), v.reason
    assert any("two decode speeds at c=32 in=256" in n for n in result.notes["c=32 in=256"])
    assert result.loads["c=32 in=256"] == "undecided"


def test_the_console_and_the_json_say_the_same(forced, gpu: Path) -> None:
    out = gpu / "validation.json"
    held = [str(gpu / "held.json"), str(gpu / "rate.json")]
    done = run_cli("sim", "--validate", str(gpu / "h200.toml"), *held, "--out", str(out))
    doc = json.loads(out.read_text())
    assert done.returncode == 5 and doc["verdict"] == "undecided"
    assert doc["speeds"]["17.05/s in=256"] == "slow"
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
