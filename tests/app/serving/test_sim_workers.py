"""`tokenpace sim --workers N`: N engine processes on one port, every one of them answering, all of them
gone after Ctrl-C; refused where it means nothing (virtual time)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import urllib.request
from pathlib import Path

from tokenpace.testing.procs import FINISHED, cli_command, run_cli


def _worker_of_a_new_connection(url: str) -> str:
    with urllib.request.urlopen(url + "/models", timeout=10) as resp:  # a new connection each time
        return str(resp.headers.get("x-tokenpace-sim-worker"))


def _children(pid: int) -> set[int]:
    out = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmdline = (stat.parent / "cmdline").read_bytes()
        except OSError:  # gone meanwhile
            continue
        if int(fields[1]) == pid and b"spawn_main" in cmdline:  # a worker (not the resource tracker)
            out.add(int(stat.parent.name))
    return out


def test_two_workers_share_the_port_and_stop_together() -> None:
    proc = subprocess.Popen(
        cli_command("sim", "--workers", "2", "--port", "0"), stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        found = re.search(r"listening on (http://\S+/v1) \(2 worker processes\)", line)
        assert found, line
        seen = {_worker_of_a_new_connection(found.group(1)) for _ in range(64)}
        assert seen == {"0", "1"}, seen  # the kernel spreads connections over both engines
        done = run_cli("bench", "--url", found.group(1), "-c", "8", "-n", "40", "--no-store", "-q",
                       "--output-len", "16")  # fmt: skip
        assert done.returncode in FINISHED, done.stderr[-2000:]  # 3: the host fell behind, the engines served
        workers = _children(proc.pid)
        assert len(workers) == 2, workers
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
    assert not [p for p in workers if os.path.exists(f"/proc/{p}")], "a worker outlived its parent"


def test_workers_in_virtual_time_are_refused_with_the_flag_that_means_it() -> None:
    done = run_cli("sim", "--virtual", "--workers", "2", "--concurrency", "2", "--requests", "4")
    assert done.returncode == 2 and "--replicas" in done.stderr and "Traceback" not in done.stderr
