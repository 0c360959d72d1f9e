"""Every `tokenpace sim` command and the virtual-time Python example in docs/sim.md work as shown."""

from __future__ import annotations

import re
import shlex
import signal
import subprocess
import urllib.request
from pathlib import Path

from tokenpace.testing.procs import cli_command, run_cli

DOC = Path(__file__).resolve().parents[2] / "docs" / "sim.md"


def _blocks(lang: str) -> list[str]:
    """The fenced blocks whose opening fence names ``lang`` ("" for a bare fence)."""
    blocks, current, inside = [], [], None
    for line in DOC.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            if inside is None:
                inside, current = line[3:].strip(), []
            else:
                if inside == lang:
                    blocks.append("\n".join(current) + "\n")
                inside = None
        elif inside is not None:
            current.append(line)
    return blocks


def _commands() -> list[list[str]]:
    lines = [ln.split("#", 1)[0].strip() for block in _blocks("") for ln in block.splitlines()]
    return [shlex.split(ln)[1:] for ln in lines if ln.startswith("tokenpace sim")]


def test_the_doc_shows_serving_listing_and_virtual_commands():
    commands = _commands()
    assert sum("--virtual" in c for c in commands) >= 2
    assert any(c[1:] == [] for c in commands)  # plain `tokenpace sim`


def test_every_virtual_and_listing_command_in_the_doc_runs():
    for args in _commands():
        if "--virtual" not in args and "--list-profiles" not in args:
            continue
        r = run_cli(*args, timeout=120)
        assert r.returncode == 0, (args, r.stderr)
        if "--virtual" in args:
            rows = [ln for ln in r.stdout.splitlines() if re.match(r"\s+(\d+/s|c=\d+)\s+\d+\s", ln)]
            assert rows and all(int(row.split()[1]) > 0 for row in rows), (args, r.stdout)


def test_every_serving_command_in_the_doc_serves_and_stops():
    for args in _commands():
        if "--virtual" in args or "--list-profiles" in args:
            continue
        p = subprocess.Popen(
            cli_command(*args, "--host", "127.0.0.1", "--port", "0"),  # a free port, not the doc's 8000
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            line = p.stdout.readline().decode()
            m = re.fullmatch(r"tokenpace sim listening on (http://127\.0\.0\.1:\d+/v1)\n", line)
            assert m, (args, line)
            with urllib.request.urlopen(m.group(1) + "/models", timeout=10) as resp:
                assert resp.status == 200
        finally:
            p.send_signal(signal.SIGINT)
            _, err = p.communicate(timeout=10)
        assert p.returncode == 0, (args, err)


def test_the_virtual_time_python_example_runs(capsys):
    examples = [b for b in _blocks("python") if "run_virtual(" in b]
    assert len(examples) == 1
    exec(compile(examples[0], str(DOC), "exec"), {})
    printed = capsys.readouterr().out
    assert "'engine'" in printed and "'ttft_ms'" in printed
