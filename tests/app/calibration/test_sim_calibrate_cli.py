"""`tokenpace sim --calibrate / --validate / --profile FILE` as a user runs them: real sweeps of a
served simulator, the profile file, the validation table, a predicted sweep that plan marks so, and
one-line errors."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from tokenpace.app.serving.simproc import SimProcess
from tokenpace.sim.profiles.profile import get_profile
from tokenpace.testing.procs import FINISHED, run_cli, run_cli_measured


def _sweep(url: str, out: Path, *args: str) -> None:
    done = run_cli_measured(
        "sweep", "--url", url, "--keep-going", "--no-store", "-q", "--out", str(out), *args
    )  # a setup: measured as the calibration it feeds needs (VALID steps)
    assert done.returncode in FINISHED, done.stderr[-2000:]


@pytest.fixture(scope="module")
def measured(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A short sweep of a served simulator with two slots and a KV cache of 4096 tokens: an
    input-length ladder, concurrency 1, 2, 4 (its /metrics scraped often), and held-out concurrency 8."""
    d = tmp_path_factory.mktemp("calibrate")
    with SimProcess(extra_args=["--max-num-seqs", "2", "--num-gpu-blocks", "256"]) as url:
        common = ["--input-len", "256", "--output-len", "16"]
        _sweep(url, d / "ladder.json", "--input-len", "16,256,1024", "-n", "4", "--output-len", "8")
        _sweep(
            url,
            d / "conc.json",
            "--concurrency",
            "1,2,4",
            "-n",
            "12",
            *common,
            "--server-metrics-interval",
            "100ms",
        )
        _sweep(url, d / "held.json", "--concurrency", "8", "-n", "24", *common)
    return d


def test_calibrate_writes_a_profile_that_every_tool_can_serve(measured: Path) -> None:
    prof = measured / "mine.toml"
    done = run_cli(
        "sim", "--calibrate", str(measured / "conc.json"), "--calibrate", str(measured / "ladder.json"),
        "--out", str(prof),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    # Every parameter says where it came from; the two-slot limit is seen (4 users, 2 decoding).
    for name in ("prefill_per_token", "step_fixed", "per_seq", "rtt", "max_num_seqs"):
        assert re.search(rf"^{name}\s+\S+\s+\S+.*\s(data|default)\s", done.stdout, re.M), name
    assert re.search(r"^max_num_seqs\s+2\s+requests\s+data\s", done.stdout, re.M), done.stdout
    assert "where it holds" in done.stdout
    # The sweep revisited concurrency 1 after 4: whether the engine's decode speed moved is said.
    assert re.search(r"^where it holds: .*c=1 in=256.*revisit", done.stdout, re.M), done.stdout
    profile = get_profile(str(prof))
    assert profile.calibrated and profile.engine.max_num_seqs == 2
    # The KV capacity, from the server's usage gauge against the tokens the client saw in flight.
    assert profile.engine.num_gpu_blocks == pytest.approx(256, rel=0.1)
    assert any("conc.json" in r for r in profile.provenance["runs"])
    assert set(profile.provenance) >= {"created_at", "engine", "fitted", "identified", "residuals", "holds"}

    val = run_cli("sim", "--validate", str(prof), str(measured / "held.json"))
    # the exit status is the profile's verdict: 0 holds, 1 fails, 5 undecided (24 requests decide little)
    verdict = re.search(r"^profile mine: (HOLDS|FAILS|UNDECIDED) ", val.stdout, re.M)
    assert verdict and val.returncode == {"HOLDS": 0, "FAILS": 1, "UNDECIDED": 5}[verdict[1]], val.stdout
    rows = [ln for ln in val.stdout.splitlines() if ln.startswith("c=8") and "%" in ln]
    assert len(rows) == 6 and all(re.search(r"[+-]\d+\.\d%.*(met|missed|undecided)", r) for r in rows)
    assert "calibrated, predicted" in val.stdout
    # Two slots were seen, so eight users decode two at a time: inside what was fitted.
    assert re.search(r"^load c=8 in=256: \w+ \(within what the profile was fitted on\)", val.stdout, re.M)

    sweep = measured / "pred.json"
    virt = run_cli(
        "sim", "--virtual", "--profile", str(prof), "--rate", "5,10", "--duration", "5s",
        "--input-len", "256", "--output-len", "16", "--replicas", "2", "--predicted-sweep", str(sweep),
    )  # fmt: skip
    assert virt.returncode == 0, virt.stderr
    assert "predicted" in virt.stdout and "x 2 replicas" in virt.stdout
    plan = run_cli("plan", str(sweep), "--peak-rps", "30")
    assert plan.returncode == 0, plan.stderr
    assert "PREDICTED by the simulator from the calibrated profile mine" in plan.stdout


@pytest.mark.parametrize(
    ("damage", "said"),
    [("missing", r"cannot read \S+"), ("corrupt", r"\S+\.jsonl: not tokenpace records \(JSONDecodeError")],
)
def test_a_revisit_that_cannot_be_read_is_said_and_the_calibration_goes_on(
    measured: Path, tmp_path: Path, damage: str, said: str
) -> None:
    d = shutil.copytree(measured, tmp_path / "runs")
    doc = json.loads((d / "conc.json").read_text())
    records = d / doc["revisit"][0]["records"]["path"]
    if damage == "missing":
        records.unlink()
    else:
        records.write_bytes(b"\x00\xffnot json\n")
    done = run_cli(
        "sim", "--calibrate", str(d / "conc.json"), "--calibrate", str(d / "ladder.json"),
        "--out", str(d / "mine.toml"),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert re.search(
        r"^where it holds: the engine's speed during the sweep was not checked: " + said, done.stdout, re.M
    ), done.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--calibrate", "{d}/conc.json"], "needs --out"),
        (["--validate", "{d}/nope.toml", "{d}/held.json"], "no profile file"),
        (["--validate", "llama-3.1-8b-h100"], "needs one or more held-out runs"),
        (["{d}/held.json"], "arguments of --validate"),
        (["--speed", "slow", "{d}/held.json"], "arguments of --validate"),  # the real mistake, not --speed
        (["--calibrate", "{d}/bad.json", "--out", "{d}/x.toml"], "not a tokenpace"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(measured: Path, args: list[str], message: str) -> None:
    (measured / "bad.json").write_text("[1, 2]")
    done = run_cli("sim", *[a.format(d=measured) for a in args])
    assert done.returncode == 2
    assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
