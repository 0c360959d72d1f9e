"""Every `--workers` / `--ray` command in docs/workers.md and README.md runs as shown (small counts,
the simulated engine or scripted servers on 127.0.0.1), and bad values exit 2 in one line."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ThreadedServer

from tokenpace.app.workers.ray_workers import ray_installed
from tokenpace.testing.procs import run_cli
from tokenpace.testing.scripted_server import Script, ScriptedServer

ROOT = Path(__file__).resolve().parents[3]


def _commands(path: Path) -> list[list[str]]:
    """The client-side `tokenpace ...` lines of the doc's code blocks that use --workers or --ray (a server's
    `sim --workers` is started and probed by tests/docs, like every server command)."""
    text = path.read_text(encoding="utf-8")
    lines = [ln.split("   #", 1)[0].strip() for ln in text.splitlines()]
    return [shlex.split(ln)[1:] for ln in lines
            if ln.startswith("tokenpace ") and not ln.startswith("tokenpace sim ")
            and re.search(r"--(workers|ray)\b", ln)]  # fmt: skip


def test_the_docs_show_workers_for_bench_sweep_ab_and_ray():
    commands = [c[0] for c in _commands(ROOT / "docs" / "workers.md")]
    assert {"bench", "sweep", "ab"} <= set(commands)
    assert _commands(ROOT / "README.md")


def test_every_workers_command_in_the_docs_runs(tmp_path):
    fast = Script(ttft_s=0.005, itl_s=0.001, tokens=4)
    with ThreadedServer(ScriptedServer(fast)) as a, ThreadedServer(ScriptedServer(fast)) as b:
        docs = _commands(ROOT / "docs" / "workers.md") + _commands(ROOT / "README.md")
        for args in docs:
            if "--ray" in args and (args[args.index("--ray") + 1] != "auto" or not ray_installed()):
                continue  # a remote cluster's address; without Ray: the test below
            args = [a.url if x == "http://127.0.0.1:8000/v1" else b.url if x == "http://127.0.0.1:8001/v1"
                    else x for x in args]  # fmt: skip
            extra = ["--blocks", "2", "--input-len", "16", "--output-len", "4"] if args[0] == "ab" else []
            r = run_cli(*args, *extra, "-q", "--no-store", cwd=str(tmp_path), timeout=180)
            # 3: NOT VALID, when a busy machine stalled a worker; the run still measured and wrote all
            assert r.returncode in (0, 3), (args, r.stdout[-2000:], r.stderr[-2000:])
            out = args[args.index("--out") + 1] if "--out" in args else None
            if out and args[0] == "bench":
                _check_bench_result(args, tmp_path / out)


def _check_bench_result(args: list[str], out: Path) -> None:
    doc = json.loads(out.read_text())
    asked = args[args.index("--workers") + 1]
    expected = 1 if asked == "auto" else int(asked)  # auto: 40 requests/s needs one
    assert doc["conditions"].get("workers", {"count": 1})["count"] == expected
    if "--ray" in args:
        assert doc["conditions"]["workers"]["kind"].startswith("Ray actors")
    lines = out.with_suffix(".records.jsonl").read_text().splitlines()
    requests = int(args[args.index("--requests") + 1])
    assert len(lines) == doc["records"]["count"] == requests  # the parent wrote every record


def test_ray_without_ray_installed_says_how_to_install_it():
    hide_ray = "import sys; sys.modules['ray'] = None; from tokenpace.cli.main import main; main()"
    args = ["bench", "--ray", "auto", "--workers", "2", "-n", "4", "--no-store", "-q"]
    r = subprocess.run([sys.executable, "-c", hide_ray, *args], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and "pip install 'tokenpace[ray]'" in r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("value", ["0", "two", "-1", "1.5"])
def test_bad_workers_value_exits_2_in_one_line(value):
    r = run_cli("bench", "--workers", value, "-n", "1", "--no-store", "-q")
    assert r.returncode == 2 and "--workers" in r.stderr and "Traceback" not in r.stderr


def test_workers_refuse_multi_turn_sessions():
    r = run_cli("bench", "--workers", "2", "--turns", "3", "-n", "2", "--no-store", "-q")
    assert r.returncode == 2 and "--turns" in r.stderr and "Traceback" not in r.stderr
