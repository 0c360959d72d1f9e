"""Every `tokenpace bench` command in docs/dialects.md runs against the simulator and measures tokens."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from tokenpace.testing.procs import run_cli

DOC = Path(__file__).resolve().parents[2] / "docs" / "dialects.md"


def _commands() -> list[list[str]]:
    lines, inside = [], False
    for line in DOC.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            inside = not inside
        elif inside and line.startswith("tokenpace "):
            lines.append(shlex.split(line)[1:])
    return lines


def test_the_doc_shows_every_dialect():
    apis = {c[c.index("--api") + 1] for c in _commands()}
    assert apis == {"chat", "anthropic", "responses", "embeddings", "realtime"}


@pytest.mark.parametrize("args", _commands(), ids=lambda a: a[a.index("--api") + 1])
def test_each_doc_command_runs_against_the_simulator(args, tmp_path):
    r = run_cli(*args, cwd=str(tmp_path), timeout=180)
    assert r.returncode == 0, r.stderr
    (result,) = (tmp_path / "results").glob("*.json")
    summary = json.loads(result.read_text())["summary"]
    assert summary["counts"]["ok"] == 20
    if "embeddings" in args:
        assert summary["output_token_throughput"] == 0 and summary["total_token_throughput"] > 0
    else:
        assert summary["output_tokens"]["p50"] == 32


def test_turns_with_a_dialect_it_cannot_rebuild_history_for_is_refused():
    r = run_cli("bench", "--api", "anthropic", "--turns", "3", "--requests", "3")
    assert r.returncode == 2 and "--turns" in r.stderr and "Traceback" not in r.stderr
