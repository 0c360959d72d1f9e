"""80 columns: under a pipe and in a narrow terminal, run ids and numbers are never cut short."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from baseline_fixtures import make_record
from rich.console import Console
from rich.table import Table

from tokenpace.adapters.store import connect
from tokenpace.cli.fit import show_table
from tokenpace.core.analysis.evidence.runnoise import GroupNoise, noise_key
from tokenpace.core.analysis.evidence.samples import METRICS
from tokenpace.testing.procs import run_cli

NARROW = {"COLUMNS": "80"}
IDS = ("3f2a9c1d7e4b", "8903f1a2b3c4")


@pytest.fixture
def store(tmp_path: Path) -> str:
    db = str(tmp_path / "runs.db")
    s = connect(db)
    rng = np.random.default_rng(1)
    for run_id, scale in zip(IDS, (271.123456, 300.987654), strict=True):
        ttfts = scale * rng.lognormal(0, 0.1, 200)
        conditions = {"model": "meta-llama/Llama-3.1-70B-Instruct", "endpoint": "e", "seed": 0,
                      "labels": {"engine": "vllm", "version": "0.6.3-very-long-build-tag"}}  # fmt: skip
        s.save_run(
            run_id, conditions, {"counts": {"ok": 200}}, [make_record(i, t) for i, t in enumerate(ttfts)]
        )
    # Reruns of this test barely moved (a repeat group learned it): the gate can decide +11 %.
    quiet = [GroupNoise(noise_key(m, q), 30, 1e-6, 0.01, 1.0) for m in METRICS for q in (50.0, 95.0)]
    s.save_repeat_group("g", [], conditions, str(conditions["model"]), quiet)
    s.close()
    return db


def _uncut(text: str) -> None:
    assert "…" not in text, text


def test_runs_list_under_a_pipe_keeps_every_id_whole(store: str) -> None:
    r = run_cli("runs", "list", "--store", store, env=NARROW)
    assert r.returncode == 0, r.stderr
    _uncut(r.stdout)
    assert all(run_id in r.stdout for run_id in IDS)
    assert "version=0.6.3-very-long-build-tag" in r.stdout
    assert "━" not in r.stdout and "\x1b[" not in r.stdout  # plain text: no box drawing, no colour


def test_compare_and_check_under_a_pipe_keep_every_number_whole(store: str) -> None:
    compared = run_cli("compare", *IDS, "--store", store, env=NARROW)
    assert compared.returncode == 0, compared.stderr
    _uncut(compared.stdout)
    assert "<0.001" in compared.stdout  # the p-value column, whole
    run_cli("baseline", "set", "prod", IDS[0], "--store", store)
    checked = run_cli("check", "--baseline", "prod", "--run", IDS[1], "--max-regression", "ttft.p95=5%",
                      "--store", store, env=NARROW)  # fmt: skip
    assert checked.returncode == 1, checked.stdout + checked.stderr
    _uncut(checked.stdout)


def _wide_table() -> Table:
    t = Table()
    for name in ("run", "started (UTC)", "model", "labels", "TTFT p95 ms", "E2E p95 ms"):
        t.add_column(name, no_wrap=True)
    t.add_row("8903f1a2b3c4d5e6", "2026-12-03 10:01:12", "meta-llama/Llama-3.1-70B-Instruct",
              "engine=vllm,version=0.6.3", "271.123", "1,350.456")  # fmt: skip
    return t


def test_a_narrow_terminal_drops_optional_columns_and_says_so() -> None:
    out = io.StringIO()
    console = Console(file=out, width=80, force_terminal=True, color_system=None)
    show_table(console, _wide_table(), optional=("labels", "started (UTC)"))
    text = out.getvalue()
    _uncut(text)
    assert "8903f1a2b3c4d5e6" in text and "271.123" in text and "1,350.456" in text
    assert "'labels'" in text and "left out to fit 80 columns" in text
    assert max(len(line) for line in text.splitlines()) <= 80


def test_a_very_narrow_terminal_folds_instead_of_cutting() -> None:
    out = io.StringIO()
    console = Console(file=out, width=40, force_terminal=True, color_system=None)
    show_table(console, _wide_table(), optional=("labels",))
    text = out.getvalue()
    _uncut(text)
    assert max(len(line) for line in text.splitlines()) <= 40
    first_column = "".join(line.split("│")[1].strip() for line in text.splitlines() if line.count("│") > 2)
    assert "8903f1a2b3c4d5e6" in first_column  # folded onto lines, every character kept
