"""`tokenpace sim` as a user runs it: start-up line, clean stop, profile listing, bad input, --virtual."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import urllib.request

from tokenpace.sim import profile_names

CMD = [sys.executable, "-m", "tokenpace", "sim"]


def test_serves_prints_one_line_and_stops_quietly_on_signals():
    for sig in (signal.SIGINT, signal.SIGTERM):
        p = subprocess.Popen(
            [*CMD, "--host", "127.0.0.1", "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        try:
            line = p.stdout.readline().decode()
            m = re.fullmatch(r"tokenpace sim listening on http://127\.0\.0\.1:(\d+)/v1\n", line)
            assert m, line
            url = f"http://127.0.0.1:{m.group(1)}/v1"
            with urllib.request.urlopen(url + "/models", timeout=5) as r:
                assert json.load(r)["data"][0]["id"]
            req = urllib.request.Request(
                url + "/completions",
                data=b'{"prompt":"hi","max_tokens":2}',
                headers={"content-type": "application/json"},
            )
            with urllib.request.urlopen(req, timeout=5) as r:
                assert json.load(r)["usage"]["completion_tokens"] == 2
        finally:
            p.send_signal(sig)
            out, err = p.communicate(timeout=10)
        assert p.returncode == 0 and out == b"" and err == b"", (sig, err)


def test_list_profiles_shows_every_profile_with_sources():
    r = subprocess.run([*CMD, "--list-profiles"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0
    for name in profile_names():
        assert name in r.stdout
    assert r.stdout.count("source: http") >= 2 * len(profile_names())
    assert "(default)" in r.stdout


def test_bad_input_gives_one_line_and_exit_2(tmp_path):
    bad_faults = tmp_path / "f.json"
    bad_faults.write_text('{"error_rate": 2}')
    for args in (
        ["--profile", "nope"],
        ["--port", "abc"],
        ["--bogus"],
        ["--fault-error-codes", "5x"],
        ["--faults", str(bad_faults)],
        ["--virtual", "--input-len", "0"],
        ["--virtual", "--output-len", "lognormal:5"],
        ["--virtual", "--duration", "0"],
        ["--virtual", "--duration", "5x"],
        ["--network", "moon"],
    ):
        r = subprocess.run([*CMD, *args], capture_output=True, text=True, timeout=30)
        assert r.returncode == 2, args
        assert r.stdout == "" and len(r.stderr.strip().splitlines()) == 1, (args, r.stderr)
        assert r.stderr.startswith("tokenpace sim: ")


def test_virtual_run_prints_a_ladder_and_writes_json(tmp_path):
    out = tmp_path / "v.json"
    r = subprocess.run(
        [
            *CMD,
            "--virtual",
            "--rate",
            "1,4",
            "--duration",
            "30",
            "--input-len",
            "256:1024",
            "--output-len",
            "64",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    assert "1/s" in r.stdout and "4/s" in r.stdout
    doc = json.loads(out.read_text())
    assert doc["conditions"]["clock"] == "virtual" and len(doc["steps"]) == 2
    assert len(doc["requests"]) == sum(s["counts"]["ok"] for s in doc["steps"]) > 60
    assert doc["steps"][1]["request_throughput"] > 2 * doc["steps"][0]["request_throughput"]


def test_virtual_takes_bench_lengths_and_durations(tmp_path):
    docs = []
    for duration in ("90", "90s", "1.5m"):
        out = tmp_path / f"{duration}.json"
        r = subprocess.run(
            [
                *CMD,
                "--virtual",
                "--rate",
                "2",
                "--duration",
                duration,
                "--input-len",
                "lognormal:512,0.5",
                "--output-len",
                "16@3,64@1",
                "--out",
                str(out),
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert r.returncode == 0, r.stderr
        docs.append(json.loads(out.read_text()))
    assert docs[0]["requests"] == docs[1]["requests"] == docs[2]["requests"]  # one duration, three spellings
    load = docs[0]["conditions"]["workload"]
    assert load["step_duration_s"] == 90.0
    assert load["input_len"]["kind"] == "lognormal" and load["output_len"]["weights"] == [3.0, 1.0]
    sends = [q["sent"] for q in docs[0]["requests"]]
    assert 120 < len(sends) < 240 and max(sends) < 90
    assert {q["output_tokens"] for q in docs[0]["requests"]} == {16, 64}
