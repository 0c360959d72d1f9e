"""What tests (and the benchmarks) share for child processes: a free port on 127.0.0.1, the CLI
run as a user runs it (real signals, real exit codes), and whether a process still runs."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

# Exit codes of a bench or sweep that ran to the end: 0, or 3 when the client fell behind (NOT VALID),
# which a busy test machine can cause on its own (a 50 ms stall). Tests about something else accept both.
FINISHED = (0, 3)


def running(pid: int) -> bool:
    """The process exists and is not a zombie (an orphan's reaper may be slow, or absent in a
    container whose first process reaps nothing). Linux: reads /proc."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] not in {"Z", "X"}
    except OSError:
        return False


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cli_command(*args: str) -> list[str]:
    """The argv that runs ``tokenpace ARGS`` with this interpreter."""
    return [sys.executable, "-m", "tokenpace", *args]


def run_cli(
    *args: str,
    env: dict[str, str] | None = None,
    timeout: float = 120,
    cwd: str | None = None,
    nice: int = 0,
) -> subprocess.CompletedProcess[str]:
    """Run ``tokenpace ARGS`` in a child process; wide columns unless ``env`` says otherwise.
    ``nice``: added to the child's niceness where the host allows it (lower: ahead of others)."""
    full_env = dict(os.environ) | {"COLUMNS": "200"} | (env or {})
    return subprocess.run(
        cli_command(*args),
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full_env,
        cwd=cwd,
        preexec_fn=(lambda: renice(nice)) if nice else None,
    )


def renice(by: int) -> None:
    """In the child before exec: one syscall, no lock taken. Refused (no CAP_SYS_NICE, as for most
    users but root): the child runs as it is."""
    with contextlib.suppress(OSError):
        os.nice(by)


NOT_VALID = 3  # a run the client itself called NOT VALID (it fell behind: a busy host)
MEASURING = ("bench", "sweep")
# A setup measures what a test then judges, so it measures as on a quieter host: ahead of CPU-bound
# neighbours where the host allows (its simulator, a child, too), and judged by its figures: a stall
# that could move a headline percentile out of its interval still makes it NOT VALID, but on a busy
# test machine (two CPU-bound processes on two cores) a low-concurrency step has 10-60 % of its
# requests held a few ms, past the 10 % a user's run tolerates by default. A test's own subject never
# runs with these (BENCHMARKS.md, the client's self-check on a busy host).
STALL_TOLERANCE_ENV = "TOKENPACE_STALL_TOLERANCE"
SETUP_STALL_TOLERANCE = "50%"
SETUP_NICE = -10


def run_cli_measured(
    *args: str,
    env: dict[str, str] | None = None,
    timeout: float = 120,
    cwd: str | None = None,
    tries: int = 3,
) -> subprocess.CompletedProcess[str]:
    """``run_cli`` for a test's setup, never for the test's own subject: a bench or sweep runs at
    ``SETUP_NICE`` where allowed and tolerates stalls on ``SETUP_STALL_TOLERANCE`` of its requests
    (unless ``env`` names a tolerance), and one that still came out NOT VALID is measured again (up to
    ``tries`` times), as a user would before taking it as evidence."""
    measuring = bool(args) and args[0] in MEASURING
    env = {STALL_TOLERANCE_ENV: SETUP_STALL_TOLERANCE} | (env or {})
    for _ in range(tries):
        r = run_cli(*args, env=env, timeout=timeout, cwd=cwd, nice=SETUP_NICE if measuring else 0)
        if r.returncode != NOT_VALID or not measuring:
            return r
    return r


def start_service(*args: str, cwd: str | Path | None = None) -> subprocess.Popen[str]:
    """``tokenpace ARGS`` (a gateway, a served simulator) started as a service manager starts it:
    its own process, real signals, stderr piped as text and unbuffered (lines arrive as written),
    stdout discarded."""
    return subprocess.Popen(
        cli_command(*args),
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def wait_listening(
    port: int, proc: subprocess.Popen[str] | subprocess.Popen[bytes], within_s: float = 20
) -> None:
    """Until something accepts on 127.0.0.1:``port``; fails with the process's output if it exits
    first, or after ``within_s`` (a Python process's start-up: a liveness bound, not a timing)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise AssertionError(f"nothing listened on port {port} within {within_s:g} s")
