"""A test's setup measures as on a quieter host and again when the client still called its run NOT
VALID; anything else, and a test's own subject, runs once and as it is."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest

from tokenpace.testing import procs


def _recorded(monkeypatch: pytest.MonkeyPatch, codes: list[int]) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []

    def fake(*args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
        calls.append({"args": args, **kw})
        return subprocess.CompletedProcess(args, codes[len(calls) - 1], "", "")

    monkeypatch.setattr(procs, "run_cli", fake)
    return calls


def test_a_not_valid_bench_is_measured_again_ahead_of_its_neighbours_and_tolerating_stalls(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls = _recorded(monkeypatch, [3, 3, 0])
    assert procs.run_cli_measured("bench", "-n", "20").returncode == 0
    assert len(calls) == 3
    assert all(c["nice"] == procs.SETUP_NICE < 0 for c in calls)
    assert all(c["env"][procs.STALL_TOLERANCE_ENV] == procs.SETUP_STALL_TOLERANCE for c in calls)


def test_a_tolerance_the_caller_names_wins_and_tries_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _recorded(monkeypatch, [3, 3])
    r = procs.run_cli_measured("sweep", env={procs.STALL_TOLERANCE_ENV: "10%"}, tries=2)
    assert r.returncode == 3 and len(calls) == 2 and calls[0]["env"][procs.STALL_TOLERANCE_ENV] == "10%"


def test_other_commands_run_once_and_as_they_are(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _recorded(monkeypatch, [3])
    assert procs.run_cli_measured("check", "--run", "x").returncode == 3
    assert len(calls) == 1 and calls[0]["nice"] == 0


def test_a_renice_the_host_refuses_leaves_the_child_running_as_it_is() -> None:
    # allowed (root with CAP_SYS_NICE): the child's niceness drops; refused: ignored, the child runs
    allowed = subprocess.run(
        [sys.executable, "-c", "import os; os.nice(-1)"], capture_output=True, timeout=60
    )
    done = subprocess.run(
        [sys.executable, "-c", "import os; print(os.nice(0))"],
        capture_output=True,
        text=True,
        preexec_fn=lambda: procs.renice(-1),
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) == os.nice(0) - (1 if allowed.returncode == 0 else 0)
