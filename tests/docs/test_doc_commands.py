"""Every `tokenpace ...` command shown in README.md and docs/*.md runs, against the simulator.

The substitutions (real URLs -> simulators the test starts, counts shrunk, RUN -> a stored run, ...)
are the table SUBSTITUTIONS in doc_commands.py. Each command gets its own copy of a store prepared
once (so `baseline unset prod` cannot break the `compare prod ...` below it) and its own folder
holding a bench result.json, a sweep.json, a traced bench (traced.json) with its spans
(traces.jsonl, from a real OTLP/HTTP receiver that stays up for every command) and a predicted
sweep (predicted.json).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from docs.doc_commands import PROFILE, ROOT, Bed, DocCommand, doc_commands, substitute
from tokenpace.testing.procs import (
    MEASURING,
    NOT_VALID,
    cli_command,
    free_port,
    run_cli,
    run_cli_measured,
)

if TYPE_CHECKING:  # imported when the bed is made: the otlp extra, needed by the traced commands
    from tokenpace.testing.otlp_receiver import OtlpReceiver

ALL_COMMANDS = doc_commands()
COMMANDS = [c for c in ALL_COMMANDS if not c.run_elsewhere()]
_LISTENING = re.compile(r"(http://127\.0\.0\.1:\d+)(/v1)?")
SENT_LATE = "requests went out late"  # the open loop's dispatch rule (app/watch/health.py)


class _Server:
    """A `tokenpace sim|gateway ...` child, up once it printed its URL (stdout or stderr)."""

    def __init__(self, args: list[str], env: dict[str, str] | None = None, cwd: Path | None = None):
        self.proc = subprocess.Popen(
            cli_command(*args),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=_base_env() | (env or {}),
            cwd=cwd,
        )
        watchdog = threading.Timer(60, self.proc.kill)  # never hang the suite on a silent child
        watchdog.start()
        self.lines: list[str] = []
        found = None
        while found is None and self.proc.stdout:
            line = self.proc.stdout.readline()
            if not line:
                break
            self.lines.append(line)
            found = _LISTENING.search(line)
        watchdog.cancel()
        assert found, (args, "".join(self.lines))
        self.origin = found.group(1)
        self.url = self.origin + "/v1"
        # Keep reading through the same buffered reader: lines it already holds (printed right after
        # the URL) would be lost to communicate(), which reads the pipe underneath it.
        self._reader = threading.Thread(target=self._read_rest, daemon=True)
        self._reader.start()

    def _read_rest(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(timeout=30)
        self._reader.join(timeout=10)
        return self.proc.returncode


def _ok(*args: str, env: dict[str, str], cwd: Path) -> str:
    r = run_cli_measured(*args, env=env, cwd=str(cwd), timeout=180)  # NOT VALID: measured again
    assert r.returncode == 0, (args, r.stdout[-2000:], r.stderr[-2000:])
    return r.stdout


def _bench(url: str, *labels: str, env: dict[str, str], cwd: Path, out: str) -> str:
    tags = [x for label in labels for x in ("--label", label)]
    _ok(
        "bench",
        "--url",
        url,
        "--model",
        "m",
        "-n",
        "500",
        "-c",
        "32",
        "--output-len",
        "4",
        *tags,
        "--out",
        out,
        "-q",
        env=env,
        cwd=cwd,
    )
    return str(json.loads((cwd / out).read_text())["run_id"])


def _gateway_session(bed: Bed, env: dict[str, str], cwd: Path) -> None:
    """Records of both arms through the gateway, for `compare source=gateway,arm=a ...`; the
    compare line the gateway prints runs too."""
    gw = _Server(
        [
            "gateway",
            "--listen",
            f"127.0.0.1:{free_port()}",
            "--upstream",
            f"a={bed.url_a}",
            "--upstream",
            f"b={bed.url_b}",
        ],
        env,
    )
    try:
        bench = ("bench", "--url", gw.url, "-n", "40", "-c", "4", "--output-len", "8", "--no-store")
        through = _ok(*bench, env=env, cwd=cwd)
        assert "tokenpace gateway /metrics" in through and "unknown" not in through, through
    finally:
        assert gw.stop() == 0, gw.lines
    hint = re.search(r"\((tokenpace compare [^;)]+)", "".join(gw.lines))  # "... as session S (HINT; ...)"
    assert hint, gw.lines
    _ok(*shlex.split(hint.group(1))[1:], env=env, cwd=cwd)


def _traced_and_predicted(url: str, rx: OtlpReceiver, env: dict[str, str], cwd: Path) -> None:
    """traced.json and its spans in traces.jsonl (client spans: the simulator exports none), for
    `report traced.json --traces traces.jsonl`; predicted.json, for `select ... predicted.json`."""
    _ok("bench", "--url", url, "-n", "20", "--output-len", "4", "--no-store", "--otlp-endpoint", rx.url,
        "--out", "traced.json", "-q", env=env, cwd=cwd)  # fmt: skip
    rx.wait_for(30, until=lambda spans: len(spans) >= 20)
    rx.write_jsonl(cwd / "traces.jsonl")
    lengths = ("--input-len", "1024", "--output-len", "256")  # the chat scenario's
    virtual = ("sim", "--virtual", "--profile", PROFILE, "--rate", "2,4,8", "--duration", "60s", *lengths)
    _ok(*virtual, "--predicted-sweep", "predicted.json", env=env, cwd=cwd)


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Bed, Path]]:
    from tokenpace.testing.otlp_receiver import OtlpReceiver

    home = tmp_path_factory.mktemp("doc-bed")
    with OtlpReceiver() as rx:  # the docs' collector, for the whole module
        sims = [_Server(["sim", "--host", "127.0.0.1", "--port", "0"]) for _ in range(2)]
        try:
            yield _prepare(home, sims[0].url, sims[1].url, rx), home
        finally:
            for sim in sims:
                sim.stop()


def _prepare(home: Path, a: str, b: str, rx: OtlpReceiver) -> Bed:
    """What the documented commands name: results, stored runs, baselines, a sweep, a gateway session."""
    env = {"TOKENPACE_STORE": str(home / "runs.db")}
    _ok("bench", "--url", a, "-n", "20", "--output-len", "4", "--no-store", "--out", "result.json",
        "-q", env=env, cwd=home)  # fmt: skip  # a result not in the store (`runs import result.json`)
    _traced_and_predicted(a, rx, env, home)
    run_a = _bench(a, "engine=vllm", "version=1.4.2", env=env, cwd=home, out="a.json")
    run_b = _bench(a, "engine=vllm", "version=1.5.0", env=env, cwd=home, out="b.json")
    run = _bench(a, "version=abc123", env=env, cwd=home, out="c.json")
    for name in ("prod", "release-1.4"):
        _ok("baseline", "set", name, run_a, env=env, cwd=home)
    sweep = ("sweep", "--url", a, "--concurrency", "1,2", "-n", "8", "--output-len", "8")
    _ok(*sweep, "--out", "sweep.json", "-q", env=env, cwd=home)
    sweep_id = str(json.loads((home / "sweep.json").read_text())["sweep_id"])
    the_bed = Bed(a, b, run=run, run_a=run_a, run_b=run_b, sweep_id=sweep_id, collector=rx.url)
    _gateway_session(the_bed, env, home)
    return the_bed


@pytest.fixture
def workspace(bed: tuple[Bed, Path], tmp_path: Path) -> tuple[Bed, Path, dict[str, str]]:
    the_bed, home = bed
    names = (
        "runs.db",
        "result.json",
        "result.records.jsonl",
        "sweep.json",
        "traced.json",
        "traced.records.jsonl",
    )
    for name in (*names, "traces.jsonl", "predicted.json"):
        shutil.copy(home / name, tmp_path / name)
    return the_bed, tmp_path, {"TOKENPACE_STORE": str(tmp_path / "runs.db")}


def test_the_docs_show_the_commands_of_every_job():
    shown = {c.subcommand for c in ALL_COMMANDS}  # some run in a test of their own (RUN_ELSEWHERE)
    assert shown >= {
        "bench",
        "sweep",
        "plan",
        "report",
        "runs",
        "compare",
        "baseline",
        "check",
        "history",
        "ab",
        "gateway",
        "sim",
    }
    assert len(COMMANDS) >= 40


def test_commands_run_elsewhere_are_run_by_a_test_that_exists():
    elsewhere = {c.run_elsewhere() for c in ALL_COMMANDS} - {""}
    assert elsewhere and all((ROOT / test).is_file() for test in elsewhere), elsewhere


def test_no_command_block_holds_a_usage_synopsis():
    synopses = [c.where for c in ALL_COMMANDS if any(a.startswith("[") or a == "..." for a in c.argv)]
    assert not synopses, f"usage synopses belong in ```text blocks: {synopses}"


def _serve(args: list[str], env: dict[str, str], cwd: Path) -> None:
    server = _Server(args, env, cwd)
    try:
        path = "/metrics" if args[0] == "gateway" else "/v1/models"
        with urllib.request.urlopen(server.origin + path, timeout=10) as resp:
            assert resp.status == 200
    finally:
        code = server.stop()
    assert code == 0, (args, "".join(server.lines))


def _base_env() -> dict[str, str]:
    return dict(os.environ) | {"COLUMNS": "200"}


def _invalid_reasons(doc: object) -> Iterator[str]:
    if isinstance(doc, dict):
        for key, value in doc.items():
            yield from (value if key == "invalid_reasons" else _invalid_reasons(value))
    elif isinstance(doc, list):
        for value in doc:
            yield from _invalid_reasons(value)


def _sent_late_only(cwd: Path, args: list[str]) -> bool:
    """An open-loop run NOT VALID (each of its measured tries) only because requests went out over
    5 ms late: a rule that no stall tolerance relaxes, which a busy host breaks even for a client
    reniced ahead of it. The command ran as written: its result (``--out``) says why."""
    if "--out" not in args or "--rate" not in args:
        return False
    out = cwd / args[args.index("--out") + 1]
    reasons = list(_invalid_reasons(json.loads(out.read_text()))) if out.is_file() else []
    return bool(reasons) and all(r.startswith(SENT_LATE) for r in reasons)


@pytest.mark.parametrize("cmd", COMMANDS, ids=[c.where for c in COMMANDS])
def test_the_documented_command_runs(cmd: DocCommand, workspace: tuple[Bed, Path, dict[str, str]]):
    the_bed, cwd, env = workspace
    args = substitute(cmd, the_bed, free_port())
    if cmd.is_server():
        _serve(args, env, cwd)
        return
    # a pipe, 80 columns; what is judged is that the command runs as written, not the busy test
    # machine's stalls: a bench or sweep is measured as a setup's is (procs.run_cli_measured)
    run = run_cli_measured if cmd.subcommand in MEASURING else run_cli
    r = run(*args, env=env | {"COLUMNS": "80"}, cwd=str(cwd), timeout=300)
    # select's exit is its verdict (docs/exit-codes.md): 1 every candidate fails, 5 none passes yet
    finished = (0, 1, 5) if cmd.subcommand == "select" else (0,)
    if r.returncode == NOT_VALID and _sent_late_only(cwd, args):
        finished = (NOT_VALID,)
    assert r.returncode in finished, (cmd.where, args, r.stdout[-3000:], r.stderr[-3000:])
    assert "…" not in r.stdout, (cmd.where, "cut short at 80 columns", r.stdout)
    assert r.stdout.strip() or r.stderr.strip(), (cmd.where, "printed nothing")
    assert "Traceback" not in r.stderr
    if cmd.subcommand == "sim" and "--virtual" in args:  # a table of steps, each with requests done
        cells = [[c.strip() for c in ln.strip("|").split("|")] for ln in r.stdout.splitlines()]
        rows = [c for c in cells if len(c) > 2 and re.fullmatch(r"\d+/s|c=\d+", c[0])]
        assert rows and all(int(row[1]) > 0 for row in rows), (cmd.where, r.stdout)
