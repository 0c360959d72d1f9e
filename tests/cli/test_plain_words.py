"""Nothing a newcomer reads is unexplained: the simulator is named, numbers carry their labels,
`runs show` prints no Python reprs, and `report` says why a run is not valid."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tokenpace.testing.procs import run_cli, run_cli_measured


@pytest.fixture(scope="module")
def simulated_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    home = tmp_path_factory.mktemp("plain")
    db, out = home / "runs.db", home / "result.json"
    # the setup measures as on a quieter host: its report must say the client kept up
    r = run_cli_measured(
        "bench", "-n", "6", "-c", "2", "--output-len", "4", "--out", str(out), "--store", str(db)
    )
    assert r.returncode == 0, r.stderr
    return out, str(db), r.stdout


def test_the_dashboard_names_the_simulator_and_labels_its_numbers(simulated_run) -> None:
    _, _, dashboard = simulated_run
    assert "tokenpace's simulated engine, profile default" in dashboard
    assert "the simulator's vllm-style /metrics" in dashboard
    assert re.search(r"memory \d+ MB", dashboard) and not re.search(r"\| \d+ MB", dashboard)
    assert "output tokens counted: 6 requests from the server's usage report" in dashboard


def test_runs_show_prints_no_python_reprs(simulated_run) -> None:
    _, db, _ = simulated_run
    r = run_cli("runs", "show", "latest", "--store", db)
    assert r.returncode == 0, r.stderr
    for repr_text in ("None", "{}", "{'", "[]"):
        assert repr_text not in r.stdout, r.stdout
    assert "labels none" in r.stdout and "stored records 6 (ok 6)" in r.stdout


def test_report_says_why_a_run_is_not_valid(simulated_run, tmp_path: Path) -> None:
    out, _, _ = simulated_run
    doc = json.loads(out.read_text())
    doc["valid"], doc["invalid_reasons"] = False, ["event-loop lag P99 9.1 ms > 5 ms"]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    r = run_cli("report", str(bad))
    assert r.returncode == 0, r.stderr
    assert "no: event-loop lag P99 9.1 ms > 5 ms" in r.stdout
    good = run_cli("report", str(out))
    assert "yes: the client kept up" in good.stdout
