"""Keep every core out of its idle states while a timing-sensitive measurement runs.

A core that idles drops its clock (or its hypervisor deschedules it) and runs slower for its next
few ms of work: on this project's 2-core VM, 1.5-1.8x after 10 ms idle and 1.7-2.0x after 100 ms
(the very first piece of work ~2x and 2.2-2.6x; benchmarks/core_wake.py). An engine that is always
busy (a closed loop) never pays that; one that idles between arrivals (an open loop) pays it on every
wake-up. A busy loop per core at Linux's SCHED_IDLE class (it gets a core only when nothing else
wants it) keeps the cores awake. It still costs a little: a warm core's work ran ~5 % slower beside
the loops here (a shared hyperthread, the scheduler). A machine tuned for benchmarks (performance
governor, no deep C-states, dedicated cores) needs none of it.

Under a cgroup CPU quota (`cpu.max`, `docker --cpus`) SCHED_IDLE time counts against the quota and
the loops would throttle what they sit beside: then none is started, and the caller gets no pids.
A loop ends by itself when its parent is gone, however the parent died.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

# The child sets its own class (before that it is an ordinary process for one Python start-up), then
# spins, checking every ~few ms that the parent that started it is still its parent.
_SPIN = (
    "import os, sys\n"
    "os.sched_setaffinity(0, {int(sys.argv[1])})\n"
    "os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))\n"
    "parent = int(sys.argv[2])\n"
    "while os.getppid() == parent:\n"
    "    for _ in range(100_000):\n"
    "        pass\n"
)
START_S = 10.0  # how long a loop may take to start (a Python start-up on a busy machine)
CPU_MAX = Path("/sys/fs/cgroup/cpu.max")


def supported() -> bool:
    return hasattr(os, "SCHED_IDLE") and hasattr(os, "sched_getaffinity")


def cpu_quota() -> bool:
    """Whether this process's cgroup caps its CPU time (cgroup v2's cpu.max other than "max")."""
    try:
        return not CPU_MAX.read_text().startswith("max")
    except OSError:
        return False


@contextmanager
def cores_kept_awake() -> Iterator[tuple[int, ...]]:
    """One SCHED_IDLE busy loop per core this process may run on (Linux, no CPU quota; elsewhere
    none). Yields the pids of the loops that are running in that class; stops them all on the way
    out, whatever happened inside or while they started."""
    if not supported() or cpu_quota():
        yield ()
        return
    spinners: list[subprocess.Popen[bytes]] = []
    try:
        for cpu in sorted(os.sched_getaffinity(0)):
            spinners.append(
                subprocess.Popen(
                    [sys.executable, "-c", _SPIN, str(cpu), str(os.getpid())], stdin=subprocess.DEVNULL
                )
            )
        yield tuple(p.pid for p in spinners if _idle_class(p))
    finally:
        for p in spinners:
            p.kill()
        for p in spinners:
            p.wait()


def _idle_class(p: subprocess.Popen[bytes]) -> bool:
    """Wait until the loop has put itself in SCHED_IDLE; False if it died first (or never did)."""
    deadline = time.monotonic() + START_S
    while p.poll() is None and time.monotonic() < deadline:
        try:
            if os.sched_getscheduler(p.pid) == os.SCHED_IDLE:
                return True
        except OSError:
            return False
        time.sleep(0.01)
    return False
