"""`bench --fail-on` and `sweep --fail-on` as a user runs them: exit 0 / 1 / 5 by the intervals,
one line naming the metric that decided (console, stderr and the result JSON), bad input exit 2."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import FAULTS, ThreadedServer

from tokenpace.testing.procs import run_cli, run_cli_measured
from tokenpace.testing.scripted_server import ScriptedServer
from tokenpace.testing.scripted_timing import Behaviour


def _bench(url: str, out: Path, gate: str, n: int = 120, measured: bool = False) -> tuple[int, str, str]:
    """``measured``: as a setup measures (procs.run_cli_measured: ahead of CPU-bound neighbours, and
    measured again when NOT VALID), for a test about what the gate shows of a run that counts."""
    run = run_cli_measured if measured else run_cli
    done = run(
        "bench", "--url", url, "--model", "ok", "-c", "2", "-n", str(n), "--output-len", "4",
        "--no-store", "-q", "--out", str(out), "--fail-on", gate, timeout=120,
    )  # fmt: skip
    return done.returncode, done.stdout, done.stderr


@pytest.fixture
def spread_server() -> Iterator[ScriptedServer]:
    """Its first tokens 20 to 80 ms late, drawn request by request: a busy host's stalls, which move
    neighbouring requests together, are a small part of the spread, so the requests stay independent
    evidence (with every request taking the same time, the stalls were all the spread there was)."""
    behaviour = Behaviour(ttft_spread_s=0.06, speed_seed=1)
    with ThreadedServer(ScriptedServer(FAULTS["ok"], scripts=FAULTS, behaviour=behaviour)) as server:
        yield server


def test_bench_exits_by_the_interval_and_names_the_metric(spread_server, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    # 300 requests: a gate's interval rests on the effective ones (those that moved together count less)
    code, stdout, stderr = _bench(spread_server.url, out, "e2e.p50<10s,error_rate<5%", n=300, measured=True)
    if code == 3:  # the client fell behind three times: NOT VALID, said so, and no gate judged
        assert "NOT VALID" in stderr and "--fail-on" not in stderr
        return
    assert code == 0, stderr
    doc = json.loads(out.read_text())["fail_on"]
    assert doc["outcome"] == "pass" and [x["outcome"] for x in doc["lines"]] == ["pass", "pass"]
    assert "fail-on PASS:" in " ".join(stdout.split())

    code, stdout, stderr = _bench(spread_server.url, out, "e2e.p50<1ms")
    assert code in (1, 3), stderr
    if code == 1:
        assert "--fail-on FAIL: e2e.p50 (e2e.p50<1ms)" in stderr and "the whole interval misses" in stderr
        assert json.loads(out.read_text())["fail_on"]["decided_by"] == "e2e.p50"


def test_a_run_too_short_for_its_gate_is_warned_before_and_undecided_after(threaded_server, tmp_path) -> None:
    code, stdout, stderr = _bench(threaded_server.url, tmp_path / "r.json", "ttft.p99<10s", n=40)
    text = " ".join((stdout + stderr).split())
    assert "warning: too few requests for a gate on P95, P99: 40 measured" in text
    assert code in (5, 3), stderr
    if code == 5:
        assert "--fail-on UNDECIDED: ttft.p99" in stderr and "too short for P99: 40 samples" in stderr


def test_bad_fail_on_is_one_line_exit_2() -> None:
    for gate, says in (("ttft.p95>500ms", "upper line"), ("ttft<500ms", "ttft.p95 or ttft.mean")):
        done = run_cli("bench", "--fail-on", gate, "-n", "5")
        assert done.returncode == 2 and says in done.stderr, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
    repeat = run_cli("bench", "--fail-on", "ttft.p50<1s", "--repeat", "3")
    assert repeat.returncode == 2 and "--fail-on judges one run" in repeat.stderr


def test_sweep_judges_every_step_and_names_the_failing_ones(threaded_server, tmp_path) -> None:
    out = tmp_path / "s.json"
    done = run_cli(
        "sweep", "--url", threaded_server.url, "--model", "ok", "--concurrency", "1,2", "-n", "60",
        "--output-len", "4", "--no-store", "-q", "--out", str(out), "--fail-on", "e2e.p50<1ms",
        timeout=120,
    )  # fmt: skip
    assert done.returncode in (1, 3, 5), done.stderr
    steps = json.loads(out.read_text())["steps"]
    outcomes = [s["fail_on"]["outcome"] for s in steps]
    # e2e is ~30 ms: a step fails, unless a busy host made its requests move together so much that
    # P50 has no interval (then it is undecided, and says what would decide it)
    for step, outcome in zip(steps, outcomes, strict=True):
        reason = step["fail_on"]["lines"][0]["reason"]
        assert outcome == "fail" or (outcome == "undecided" and "too few effective samples" in reason)
    text = " ".join(done.stdout.split())
    for i, outcome in enumerate(outcomes, start=1):
        assert f"fail-on step {i} (c={i}): {outcome.upper()}: e2e.p50" in text
    failing = [str(i) for i, o in enumerate(outcomes, start=1) if o == "fail"]
    if done.returncode == 1:
        assert f"--fail-on fail at step(s) {', '.join(failing)} (step {failing[0]}: e2e.p50)" in done.stderr
    assert failing or done.returncode != 1
