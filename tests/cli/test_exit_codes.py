"""Exit codes of bench and sweep as CI sees them (subprocesses against the scripted server and the
simulator, small counts), and check/compare refusing to judge a run that is not valid."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from baseline_fixtures import ROOT, served, tokenpace

from tokenpace.app.run.exit_status import (
    BAD_INPUT,
    ERROR,
    INTERRUPTED,
    NO_SUCCESS,
    NOT_VALID,
    OK,
    TERMINATED,
    RunOutcome,
    run_exit_status,
    sweep_exit_status,
)
from tokenpace.app.serving.simproc import SimProcess
from tokenpace.testing.scripted_server import Script

FAST = Script(ttft_s=0.01, itl_s=0.001)
SLOW = Script(ttft_s=0.02, itl_s=0.01, tokens=20)
BENCH = ("bench", "--model", "m", "--input-len", "16", "--output-len", "8", "-q")


def outcome(interrupted=False, reason="completed", client_valid=True, sent=10, ok=10) -> RunOutcome:
    return RunOutcome(interrupted, reason, client_valid, sent, ok)


def test_one_decision_orders_the_codes():
    assert run_exit_status(outcome()).code == OK
    assert run_exit_status(outcome(client_valid=False)).code == NOT_VALID
    assert run_exit_status(outcome(ok=0)).code == NO_SUCCESS
    assert run_exit_status(outcome(ok=0, client_valid=False)).code == NO_SUCCESS  # nothing to judge
    assert run_exit_status(outcome(sent=0, ok=0)).reason == "no request succeeded (no request was sent)"
    assert run_exit_status(outcome(reason="aborted: 50 requests in a row", ok=0)).code == ERROR
    assert run_exit_status(outcome(), stored=False).code == BAD_INPUT
    assert run_exit_status(outcome(True, "interrupted by SIGINT", ok=0)).code == INTERRUPTED
    assert run_exit_status(outcome(True, "interrupted by SIGTERM")).code == TERMINATED
    steps = [outcome(), outcome(client_valid=False), outcome()]
    status = sweep_exit_status(steps, False, "completed")
    assert status.code == NOT_VALID and "step(s) 2" in status.reason
    assert sweep_exit_status([outcome(ok=0), outcome(ok=0)], False, "completed").code == NO_SUCCESS
    assert sweep_exit_status([outcome()], False, "step 2: aborted: client error").code == ERROR
    assert sweep_exit_status(steps, True, "interrupted by SIGTERM").code == TERMINATED


def test_bench_exits_0_when_it_measured_what_was_asked(tmp_path: Path):
    with served(FAST) as srv:
        done = tokenpace(*BENCH, "--url", srv.url, "-n", "8", "-c", "2", "--out", str(tmp_path / "r.json"))
    assert done.returncode == OK, done.stderr
    assert json.loads((tmp_path / "r.json").read_text())["valid"] is True


def test_a_url_without_v1_says_so_and_is_not_a_success(tmp_path: Path):
    with SimProcess(None) as url:
        bare = url.removesuffix("/v1")
        refused = tokenpace("bench", "--url", bare, "-n", "4", "-q", "--no-store")
        out = tmp_path / "r.json"
        done = tokenpace("bench", "--url", bare, "--model", "m", "-n", "4", "-c", "2", "-q", "--no-store",
                         "--out", str(out))  # fmt: skip
    assert refused.returncode == BAD_INPUT and "probably lacks /v1" in refused.stderr
    assert done.returncode == NO_SUCCESS, done.stderr
    result = json.loads(out.read_text())
    assert result["valid"] is False and result["summary"]["counts"]["http_error"] == 4
    assert any("every request got HTTP 404" in w and "probably lacks /v1" in w for w in result["warnings"])
    assert "probably lacks /v1" in done.stdout and "VALID: the client kept up" not in done.stdout


@pytest.mark.timing
def test_a_client_that_stalled_exits_3(tmp_path: Path):
    # the client process stopped for 0.4 s mid-run: the requests in flight ended inside the stop, so
    # their timestamps are late; with no held request tolerated, the run is NOT VALID
    out = tmp_path / "r.json"
    with served(SLOW) as srv:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tokenpace", *BENCH, "--url", srv.url, "-n", "40", "-c", "2",
             "--output-len", "20", "--out", str(out), "--no-store", "--stall-tolerance", "0"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
        )  # fmt: skip
        deadline = time.monotonic() + 30
        while srv.stats.requests < 6 and time.monotonic() < deadline:
            time.sleep(0.02)
        proc.send_signal(signal.SIGSTOP)
        time.sleep(0.4)
        proc.send_signal(signal.SIGCONT)
        _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == NOT_VALID, stderr
    assert "NOT VALID" in stderr
    result = json.loads(out.read_text())
    assert result["valid"] is False and result["summary"]["client"]["valid"] is False
    impact = result["summary"]["client"]["stalls"]["impact"]
    assert impact["held"] >= 1 and impact["longest_stall_ms"] >= 300 and impact["tolerance"] == 0
    held = [json.loads(line) for line in out.with_suffix(".records.jsonl").read_text().splitlines()]
    assert sum(r["client_stall_ms"] is not None for r in held) == impact["held"]  # marked in the file


def _interrupt(srv_url: str, out: Path, db: str, sig: signal.Signals, srv) -> subprocess.CompletedProcess:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tokenpace", *BENCH, "--url", srv_url, "-n", "2000", "-c", "2",
         "--out", str(out), "--store", db, "--label", "side=cut"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
    )  # fmt: skip
    deadline = time.monotonic() + 30
    before = srv.stats.requests
    while srv.stats.requests < before + 8 and time.monotonic() < deadline:
        time.sleep(0.02)
    proc.send_signal(sig)
    stdout, stderr = proc.communicate(timeout=60)
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)


@pytest.fixture(scope="module")
def store_with_an_interrupted_run(tmp_path_factory):
    d = tmp_path_factory.mktemp("exit")
    db = f"sqlite:///{d / 'runs.db'}"
    with served(SLOW) as srv:
        good = []
        for i in (1, 2):
            out = str(d / f"g{i}.json")
            for _attempt in range(3):  # a busy test machine can stall the client (exit 3): try again
                done = tokenpace(*BENCH, "--url", srv.url, "-n", "30", "-c", "2", "--out", out,
                                 "--store", db, "--label", f"side=good{i}")  # fmt: skip
                if done.returncode != NOT_VALID:
                    break
            good.append(done)
        cut = _interrupt(srv.url, d / "cut.json", db, signal.SIGTERM, srv)
    assert [g.returncode for g in good] == [OK, OK]
    return db, d, cut


def test_sigterm_exits_143_and_the_stored_run_is_not_valid(store_with_an_interrupted_run):
    from tokenpace.adapters.store import connect

    db, d, cut = store_with_an_interrupted_run
    assert cut.returncode == TERMINATED, cut.stderr
    result = json.loads((d / "cut.json").read_text())
    assert result["valid"] is False and result["interrupted"] is True
    assert "the run did not finish: interrupted by SIGTERM" in result["invalid_reasons"]
    stored = connect(db).resolve("side=cut")
    assert stored.valid is False and stored.interrupted and stored.stop_reason == "interrupted by SIGTERM"
    assert "the run did not finish: interrupted by SIGTERM" in stored.extra["invalid_reasons"]


def test_compare_and_check_refuse_an_invalid_run_unless_allowed(store_with_an_interrupted_run):
    db, _, _ = store_with_an_interrupted_run
    fine = tokenpace("compare", "side=good1", "side=good2", "--store", db)
    assert fine.returncode == OK, fine.stderr
    refused = tokenpace("compare", "side=good1", "side=cut", "--store", db)
    assert refused.returncode == BAD_INPUT
    assert (
        "run B" in refused.stderr and "is NOT VALID" in refused.stderr and "--allow-invalid" in refused.stderr
    )
    assert len(refused.stderr.strip().splitlines()) == 1 and "Traceback" not in refused.stderr
    allowed = tokenpace("compare", "side=good1", "side=cut", "--store", db, "--allow-invalid")
    assert allowed.returncode == OK and "judged only because allowed" in allowed.stdout
    assert tokenpace("baseline", "set", "rel", "side=good1", "--store", db).returncode == 0
    gate = ("check", "--baseline", "rel", "--max-regression", "e2e.p50=50%", "--store", db)
    check = tokenpace(*gate, "--run", "side=cut")
    assert check.returncode == BAD_INPUT and "interrupted by SIGTERM" in check.stderr
    judged = tokenpace(*gate, "--run", "side=cut", "--allow-invalid")
    assert judged.stderr == "", judged.stdout
    assert any(line.startswith(("PASS", "REGRESSED", "UNDECIDED")) for line in judged.stdout.splitlines())
    # a valid run is judged, never refused (one run a side at an assumed noise may stay undecided)
    valid = tokenpace(*gate, "--run", "side=good2")
    assert valid.stderr == "" and any(
        line.startswith(("PASS", "REGRESSED", "UNDECIDED")) for line in valid.stdout.splitlines()
    )
