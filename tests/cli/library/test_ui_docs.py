"""Every `tokenpace` command of docs/web-console.md, run as written against a throwaway store:
the servers on a free port (probed once, then stopped with SIGINT), the key file written first,
RUN_A, RUN_B and RUN the fixture's runs (docs/... RUN_ELSEWHERE in tests/docs/doc_commands.py)."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import urllib.request
from pathlib import Path

import pytest
from app.console.console_fixtures import make_store

from tokenpace.testing.procs import cli_command, free_port, run_cli, wait_listening

DOC = Path(__file__).resolve().parents[3] / "docs" / "web-console.md"
KEY = "docs-console-key-0123456789"
NAMES = {"RUN_A": "night03", "RUN_B": "night10", "RUN": "night03"}


def _commands() -> list[list[str]]:
    out, inside = [], False
    for line in DOC.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            inside = not inside
        elif inside and line.startswith("tokenpace "):
            out.append([NAMES.get(a, a) for a in shlex.split(line)[1:]])
    return out


def test_the_doc_shows_the_console_the_key_and_the_offline_pages() -> None:
    cmds = _commands()
    assert [c[0] for c in cmds] == ["ui", "ui", "report", "report"]
    assert "--access-key-file" in cmds[1] and "--compare" in cmds[2] and "--history" in cmds[3]


def _serve(args: list[str], cwd: Path, env: dict[str, str]) -> dict:
    port = free_port()
    listen = args.index("--listen") + 1 if "--listen" in args else None
    if listen is not None:
        args[listen] = f"{args[listen].rsplit(':', 1)[0]}:{port}"
    else:
        args += ["--listen", f"127.0.0.1:{port}"]
    proc = subprocess.Popen(
        cli_command(*args), cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        wait_listening(port, proc)
        headers = {"Authorization": f"Bearer {KEY}"} if "--access-key-file" in args else {}
        req = urllib.request.Request(f"http://127.0.0.1:{port}/api/runs?valid=no", headers=headers)
        with urllib.request.urlopen(req, timeout=30) as resp:
            return json.loads(resp.read())
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=30)


@pytest.mark.parametrize("index", range(4))
def test_each_doc_command_runs(index: int, tmp_path: Path) -> None:
    make_store(tmp_path / "runs.db").close()
    (tmp_path / "console.key").write_text(KEY + "\n")
    env = dict(os.environ) | {"TOKENPACE_STORE": str(tmp_path / "runs.db")}
    args = _commands()[index]
    if args[0] == "ui":
        data = _serve(args, tmp_path, env)
        assert [r["id"] for r in data["runs"]] == ["night05"]
        return
    done = run_cli(*args, cwd=str(tmp_path), env=env, timeout=180)
    assert done.returncode == 0, done.stderr
    written = tmp_path / args[args.index("--html") + 1]
    assert written.stat().st_size > 1_000_000  # plotly.js is inside
