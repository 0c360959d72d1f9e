"""Keep every core out of its idle states while a timing-sensitive measurement runs.

A core that idles drops its clock (or its hypervisor deschedules it) and runs slower for its next
few ms of work: on this project's 2-core VM, 1.3-1.5x after 10 ms idle and 2.4x after 100 ms
(benchmarks/core_wake.py). An engine that is always busy (a closed loop) never pays that; one that
idles between arrivals (an open loop) pays it on every wake-up. A busy loop per core at Linux's
SCHED_IDLE class (it gets a core only when nothing else wants it) keeps the cores awake without
taking time from anything else; a machine tuned for benchmarks (performance governor, no deep
C-states, dedicated cores) needs none of it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

_SPIN = (
    "import os, sys\n"
    "os.sched_setaffinity(0, {int(sys.argv[1])})\n"
    "os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))\n"
    "while True:\n    pass\n"
)


def supported() -> bool:
    return hasattr(os, "SCHED_IDLE") and hasattr(os, "sched_getaffinity")


@contextmanager
def cores_kept_awake() -> Iterator[int]:
    """One SCHED_IDLE busy loop per core this process may run on (Linux; elsewhere none); yields how
    many it started, and stops them on the way out, whatever happened inside."""
    if not supported():
        yield 0
        return
    spinners = [
        subprocess.Popen([sys.executable, "-c", _SPIN, str(cpu)], stdin=subprocess.DEVNULL)
        for cpu in sorted(os.sched_getaffinity(0))
    ]
    try:
        yield len(spinners)
    finally:
        for p in spinners:
            p.kill()
            p.wait()
