"""`tokenpace bench` as a user runs it: exit codes, one-line errors, files that keep every record."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tokenpace.adapters.results import read_records
from tokenpace.core.metrics import summarize
from tokenpace.testing.procs import FINISHED, run_cli


def tokenpace(*args, timeout=60):
    return run_cli(*args, timeout=timeout)


def test_run_writes_summary_and_records_that_recompute_it(threaded_server, tmp_path):
    out = tmp_path / "result.json"
    p = tokenpace(
        "bench",
        "--url",
        threaded_server.url,
        "--model",
        "ok",
        "-c",
        "4",
        "-n",
        "30",
        "--input-len",
        "8:32",
        "--output-len",
        "6",
        "--warmup",
        "2",
        "--slo",
        "ttft=500ms,tpot=50ms",
        "--label",
        "engine=scripted",
        "--out",
        str(out),
        "-q",
    )
    assert p.returncode in FINISHED, p.stderr
    assert "TTFT" in p.stdout and "Goodput" in p.stdout and "VALID" in p.stdout  # or NOT VALID
    result = json.loads(out.read_text())
    records = read_records(tmp_path / "result.records.jsonl")
    assert len(records) == 32 and result["records"]["count"] == 32
    again = summarize(records).to_dict()
    for key in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"):
        assert again[key]["p50"] == pytest.approx(result["summary"][key]["p50"])
        assert again[key]["n"] == result["summary"][key]["n"]
    assert result["summary"]["counts"]["ok"] == 30
    assert result["conditions"]["labels"] == {"engine": "scripted"}
    assert result["conditions"]["load"]["warmup"] == 2
    assert result["summary"]["goodput"] is not None
    assert result["valid"] == (not result["invalid_reasons"])


def test_failing_server_gives_failure_records_not_a_crash(threaded_server, tmp_path):
    out = tmp_path / "r.json"
    p = tokenpace(
        "bench",
        "--url",
        threaded_server.url,
        "--model",
        "http500",
        "-c",
        "2",
        "-n",
        "6",
        "--out",
        str(out),
        "-q",
    )
    assert p.returncode == 4, p.stderr  # every request failed: not a success, but no crash either
    assert "no request succeeded (all 6 requests failed)" in p.stderr
    result = json.loads(out.read_text())
    assert result["summary"]["counts"]["http_error"] == 6
    assert result["valid"] is False and "no request succeeded (6 sent)" in result["invalid_reasons"]
    assert "HTTP 500" in p.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--input-len", "abc"], "not a number"),
        (["--rate", "5", "--concurrency", "3"], "pick one"),
        (["--duration", "soon"], "not a duration"),
        (["--slo", "latency=5ms"], "SLOs are"),
        (["--url", "ftp://nowhere"], "http://"),
        (["--url", "http://127.0.0.1:9/v1", "--model", "m"], "cannot reach"),
        (["--header", "novalue"], "NAME:VALUE"),
        (["--requests", "0"], "at least 1"),
        (["--stall-tolerance", "150%"], "--stall-tolerance '150%': a share is between 0% and 100%"),
        (["--stall-tolerance", "some"], "--stall-tolerance 'some': give a share"),
    ],
)
def test_bad_input_gives_one_clear_line_and_exit_2(args, message):
    p = tokenpace("bench", *args)
    assert p.returncode == 2
    assert message in p.stderr
    assert "Traceback" not in p.stderr + p.stdout


def test_the_stall_tolerance_default_comes_from_the_environment_and_the_flag_wins(threaded_server, tmp_path):
    """A CI runner sets it once for every run; a bad value is bad input like the flag's."""
    args = ("bench", "--url", threaded_server.url, "--model", "ok", "-n", "4", "--output-len", "4")
    for env, flag, tolerance in (("30%", (), 0.3), ("30%", ("--stall-tolerance", "20%"), 0.2), ("", (), 0.1)):
        out = tmp_path / f"{tolerance}.json"  # "": unset
        p = run_cli(*args, *flag, "--out", str(out), "--no-store", env={"TOKENPACE_STALL_TOLERANCE": env})
        assert p.returncode in FINISHED, p.stderr
        assert json.loads(out.read_text())["summary"]["client"]["stalls"]["impact"]["tolerance"] == tolerance
    bad = run_cli(*args, "--no-store", env={"TOKENPACE_STALL_TOLERANCE": "most"}, timeout=60)
    assert bad.returncode == 2 and "'most': give a share" in bad.stderr and "Traceback" not in bad.stderr


def test_ctrl_c_stops_the_run_and_still_writes_what_was_measured(threaded_server, tmp_path):
    out = tmp_path / "r.json"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tokenpace",
            "bench",
            "--url",
            threaded_server.url,
            "--model",
            "ok",
            "-c",
            "4",
            "-n",
            "100000",
            "--output-len",
            "64",
            "--out",
            str(out),
            "-q",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, PYTHONUNBUFFERED="1"),
    )
    records = tmp_path / "r.records.jsonl"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and (not records.exists() or records.stat().st_size == 0):
        time.sleep(0.1)  # wait until some requests completed (records are flushed as they end)
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr
    result = json.loads(out.read_text())
    assert result["interrupted"] is True
    saved = read_records(records)
    assert len(saved) == result["records"]["count"] > 0
    statuses = {r.status.value for r in saved}
    assert "ok" in statuses and "cancelled" in statuses
    assert "INTERRUPTED" in stdout


def test_default_target_is_the_simulated_engine(tmp_path):
    out = tmp_path / "sim.json"
    p = tokenpace(
        "bench",
        "-c",
        "4",
        "-n",
        "12",
        "--input-len",
        "64:256",
        "--output-len",
        "16",
        "--out",
        str(out),
        "-q",
        timeout=120,
    )
    assert p.returncode in FINISHED, p.stderr
    result = json.loads(out.read_text())
    assert result["conditions"]["target"] == "sim:default"
    assert result["conditions"]["endpoint"].startswith("http://127.0.0.1:")
    s = result["summary"]
    assert s["counts"]["ok"] == 12
    assert s["tokens"]["output_sources"] == {"server": 12}
    assert s["tokens"]["mismatched"] == 0  # one token per chunk, and the client counted them all
    assert s["ttft_ms"]["p50"] > 0 and s["tpot_ms"]["p50"] > 0
