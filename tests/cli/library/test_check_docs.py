"""Every documented `tokenpace check --baseline ...` against a store whose truth is known: the same
server under the same conditions, with the noise between its runs learned from a repeat group. The
gate must pass (and never on a point estimate); a store without any group must say UNDECIDED."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from baseline_fixtures import make_record
from click.testing import CliRunner
from docs.doc_commands import Bed, doc_commands, substitute

from tokenpace.adapters.store import connect
from tokenpace.cli.main import cli
from tokenpace.core.analysis.evidence.repeats import repeat_noise

CHECKS = [c for c in doc_commands() if c.run_elsewhere() == "tests/cli/library/test_check_docs.py"]
CONDITIONS = {"model": "m", "endpoint": "e", "api": "chat", "load": {"concurrency": 16}}


def _records(rng: np.random.Generator, wander: float) -> list:
    return [make_record(i, 60 * wander * rng.lognormal(0, 0.05), 8 * wander, 8) for i in range(300)]


def _store(path: Path, learned: bool) -> str:
    db = f"sqlite:///{path / 'runs.db'}"
    store = connect(db)
    rng = np.random.default_rng(3)
    if learned:  # the library's earlier runs of the release (every stored rerun of a test teaches it)
        old = CONDITIONS | {"started_at": "2024-05-01T00:00:00+00:00", "labels": {"version": "1.4.2"}}
        for i, w in enumerate((1.0, 1.01, 0.99) * 8):
            store.save_run(f"old{i:09d}", old, {}, _records(rng, w))
    for i, version in enumerate(("1.4.2", "1.5.0", "abc123")):
        started = f"2024-06-0{i + 1}T00:00:00+00:00"
        conditions = CONDITIONS | {"started_at": started, "labels": {"version": version}}
        store.save_run(f"run{i:09d}", conditions, {}, _records(rng, 1.0))
    store.set_baseline("prod", "run000000000")
    store.set_baseline("release-1.4", "run000000000")
    if learned:  # what `bench --repeat 6` of this server taught: its speed wanders about 1 %
        group = [_records(rng, w) for w in (1.0, 1.01, 0.99, 1.0, 1.01, 0.99)]
        store.save_repeat_group("g", [], CONDITIONS, "m", repeat_noise(group))

    return db


@pytest.mark.parametrize("cmd", CHECKS, ids=[c.where for c in CHECKS])
def test_the_documented_gate_passes_the_same_server(cmd, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    args = substitute(cmd, Bed("http://127.0.0.1:1/v1", "http://127.0.0.1:2/v1", "", "", "", ""), 0)
    env = {"TOKENPACE_STORE": _store(tmp_path, learned=True), "COLUMNS": "200"}
    done = CliRunner().invoke(cli, args, env=env)
    assert done.exit_code == 0, (cmd.where, done.output)
    assert "PASS: no regression" in done.output and "from 30 runs in 2 group(s) of the library" in done.output


def test_without_repeated_runs_the_gate_says_undecided_and_what_would_decide(tmp_path: Path) -> None:
    env = {"TOKENPACE_STORE": _store(tmp_path, learned=False), "COLUMNS": "200"}
    args = ["check", "--baseline", "prod", "--max-regression", "ttft.p95=5%,e2e.p95=10%"]
    done = CliRunner().invoke(cli, args, env=env)
    assert done.exit_code == 5 and "UNDECIDED: ttft.p95, e2e.p95" in done.output
    assert "assumed 5% up to P50, 10% above" in done.output and "holds the 5% allowed" in done.output
