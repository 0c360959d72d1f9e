"""docs/exit-codes.md's commands, run as written in order (one store), each ending with the exit code
its comment says: a gate decided by intervals, a run too short for its percentile, bad input."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from docs.doc_commands import ROOT, doc_commands
from tokenpace.testing.procs import run_cli

PAGE = ROOT / "docs" / "exit-codes.md"


def _documented() -> list[tuple[list[str], int]]:
    """(argv after `tokenpace`, the documented code) for each command of the page, in order."""
    out = []
    lines = PAGE.read_text(encoding="utf-8").splitlines()
    for cmd in (c for c in doc_commands() if c.where.startswith("docs/exit-codes.md:")):
        raw = lines[int(cmd.where.split(":")[1]) - 1]
        code = re.search(r"#\s*exit (\d+)", raw)
        assert code, f"{cmd.where}: say the exit code in a comment (# exit N)"
        out.append((list(cmd.argv), int(code.group(1))))
    return out


def test_the_page_shows_every_kind_of_gate_outcome() -> None:
    assert sorted({code for _, code in _documented()}) == [0, 1, 2, 5]


def test_each_command_exits_as_documented(tmp_path: Path) -> None:
    stored = False
    for argv, code in _documented():
        if argv[0] == "check" and not stored:
            continue  # the bench before it was NOT VALID on a busy host: nothing stored to judge
        done = run_cli(*argv, cwd=str(tmp_path), timeout=240)
        if done.returncode == 3 and code != 3:  # a busy host's client fell behind: said so, not judged
            assert "NOT VALID" in done.stderr and "--fail-on" not in done.stderr, done.stderr
            continue
        stored = stored or "--store" in argv
        assert done.returncode == code, (shlex.join(argv), done.stdout[-2000:], done.stderr[-2000:])
        assert "Traceback" not in done.stderr
        if code and argv[0] == "bench":
            assert len(done.stderr.strip().splitlines()) == 1, done.stderr  # one line says why
        if code in (1, 5):
            assert "--fail-on" in done.stderr or "fail-on" in done.stdout
