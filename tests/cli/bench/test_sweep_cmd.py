"""`tokenpace sweep` and `tokenpace plan` as a user runs them: files, the knee on a real queue, Ctrl-C."""

from __future__ import annotations

import json
import math
import signal
import subprocess
import sys
import time

import pytest

from tokenpace.adapters.results import read_records
from tokenpace.app.serving.simproc import SimProcess
from tokenpace.testing.procs import FINISHED, run_cli, run_cli_measured


def tokenpace(*args, timeout=90):
    return run_cli(*args, timeout=timeout)


def one_line_error(p):
    assert p.returncode == 2
    assert "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr


def test_sweep_writes_every_step_and_its_records(threaded_server, tmp_path):
    out = tmp_path / "sweep.json"
    p = tokenpace(
        "sweep", "--url", threaded_server.url, "--model", "ok", "-c", "1,2", "-n", "6",
        "--input-len", "16", "--output-len", "4", "--out", str(out), "-q", "--stall-tolerance", "25%",
    )  # fmt: skip
    assert p.returncode in FINISHED, p.stderr
    assert "TTFT p95" in p.stdout and "Knee" in p.stdout
    doc = json.loads(out.read_text())
    assert [s["conditions"]["load"]["concurrency"] for s in doc["steps"]] == [1, 2]
    for i, step in enumerate(doc["steps"], 1):
        assert step["records"]["path"] == f"sweep.step{i:02d}.records.jsonl"
        records = read_records(tmp_path / step["records"]["path"])
        assert len(records) == 6 == step["records"]["count"]
        assert step["summary"]["counts"]["ok"] == 6
        assert step["summary"]["client"]["stalls"]["impact"]["tolerance"] == 0.25  # the flag, per step
    assert {"analysis", "plan"} <= set(doc)


@pytest.fixture(scope="module")
def saturating_sweep(tmp_path_factory):
    """The simulated engine with 4 batch slots: TTFT must climb once concurrency passes 4. 64 requests
    a step: 16 users need 4 rounds or more for a steady window (fewer make the step short). It measures
    what the tests judge, so as a setup does (procs.run_cli_measured): a step a busy host made NOT
    VALID is left out of the knee, and this module-scoped sweep is not rerun with a failed test."""
    out = tmp_path_factory.mktemp("sim") / "sweep.json"
    with SimProcess(None, ["--max-num-seqs", "4"]) as url:
        p = run_cli_measured(
            "sweep", "--url", url, "-c", "1,2,4,8,16", "-n", "64", "--input-len", "256",
            "--output-len", "16", "--ignore-eos", "--slo", "ttft=100ms", "--out", str(out), "-q", timeout=90,
        )  # fmt: skip
    assert p.returncode in FINISHED, p.stderr
    return out, p


@pytest.mark.timing
def test_knee_is_found_where_the_engine_runs_out_of_batch_slots(saturating_sweep):
    out, p = saturating_sweep
    doc = json.loads(out.read_text())
    knee = doc["analysis"]["knee"]
    assert knee is not None and knee["index"] == 2  # c=4: the last step before requests queue
    assert doc["analysis"]["slo_capacity"]["step"] == 3
    assert doc["analysis"]["littles_law"]["consistent"] is True
    assert "knee" in p.stdout


@pytest.mark.timing
def test_plan_sizes_the_fleet_from_the_sweep(saturating_sweep, tmp_path):
    out, _ = saturating_sweep
    doc = json.loads(out.read_text())
    plan_out = tmp_path / "plan.json"
    p = tokenpace("plan", str(out), "--peak-rps", "300", "--headroom", "30%", "--out", str(plan_out))
    assert p.returncode == 0, p.stderr
    ceiling = doc["plan"]["ceiling_rps_per_replica"]
    expected = math.ceil(300 / (ceiling * 0.7))
    assert f"Replicas for a peak of 300 req/s: {expected}" in p.stdout
    plan = json.loads(plan_out.read_text())["plan"]
    assert plan["replicas"] == expected and plan["headroom"] == pytest.approx(0.3)


def test_ctrl_c_saves_finished_steps_and_the_partial_one(threaded_server, tmp_path):
    out = tmp_path / "sweep.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tokenpace", "sweep", "--url", threaded_server.url, "--model", "ok",
         "-c", "8,1,1", "-n", "40", "--input-len", "16", "--output-len", "30", "--out", str(out), "-q"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 30
    while not out.exists() and time.monotonic() < deadline:  # written when step 1 finished
        time.sleep(0.05)
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    doc = json.loads(out.read_text())
    assert doc["interrupted"] is True and len(doc["steps"]) == 2
    assert doc["steps"][0]["interrupted"] is False and doc["steps"][1]["interrupted"] is True
    partial = read_records(tmp_path / "sweep.step02.records.jsonl")
    # what step 2 finished before the signal is kept and counted (on a busy host it may be nothing yet)
    assert len(partial) < 40 and len(partial) == doc["steps"][1]["records"]["count"]


def test_bad_input_is_one_line_and_exit_2(tmp_path, threaded_server):
    one_line_error(tokenpace("sweep", "-c", "1,x"))
    one_line_error(tokenpace("sweep", "-c", "1,2", "-r", "1,2"))
    one_line_error(tokenpace("sweep", "-c", "1.5"))
    one_line_error(tokenpace("sweep", "--url", threaded_server.url, "-c", "1", "--headroom", "lots"))
    one_line_error(tokenpace("plan", str(tmp_path / "missing.json")))
    (tmp_path / "bench.json").write_text(json.dumps({"run_id": "x", "summary": {}}))
    one_line_error(tokenpace("plan", str(tmp_path / "bench.json")))
    (tmp_path / "junk.json").write_text("{not json")
    one_line_error(tokenpace("plan", str(tmp_path / "junk.json")))


@pytest.mark.timing
def test_auto_sweep_probes_places_rate_steps_and_plans_on_their_steady_state(tmp_path):
    out = tmp_path / "auto.json"
    with SimProcess(None, ["--max-num-seqs", "4"]) as url:
        p = tokenpace(
            "sweep", "--auto", "--url", url, "-n", "40", "--auto-steps", "3", "--input-len", "64",
            "--output-len", "8", "--ignore-eos", "--out", str(out), "-q", "--no-store",
        )  # fmt: skip
    assert p.returncode in FINISHED, p.stderr
    doc = json.loads(out.read_text())
    assert [s["sweep_step"]["phase"] for s in doc["probe"]] == ["probe"] * len(doc["probe"])
    assert doc["probe_plateau_rps"] is not None  # 4 batch slots: the doubling levels off
    assert len(doc["steps"]) == 3 and doc["steps"][-1]["conditions"]["load"]["mode"] == "open_loop"
    for s in doc["steps"]:
        steady = s["summary"]["steady"]
        assert steady["window_s"] > 0 and steady["excluded_drain_s"] >= 0
    ms = doc["analysis"]["max_sustainable"]
    assert ms["extend_the_sweep"] is False  # the probe found the maximum the rate steps went up to
    assert ms["lower_bound"] is True and ms["lower_bound_why"]  # an open loop's: said, with why
    assert "Figures rest on step(s)" in p.stdout
