"""The busy loops that keep the cores awake: one per core, at SCHED_IDLE, and always stopped, even
when the measurement raises or the parent that started them dies."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from tokenpace.testing.awake import cores_kept_awake, cpu_quota, supported
from tokenpace.testing.procs import running

pytestmark = pytest.mark.skipif(
    not supported() or cpu_quota(), reason="needs Linux's SCHED_IDLE and no cgroup CPU quota"
)


def test_one_idle_class_loop_per_core_and_none_left_after() -> None:
    with cores_kept_awake() as pids:
        assert len(pids) == len(os.sched_getaffinity(0))
        for pid in pids:
            assert os.sched_getscheduler(pid) == os.SCHED_IDLE
            assert len(os.sched_getaffinity(pid)) == 1
    assert not any(running(pid) for pid in pids)


def test_the_loops_stop_when_the_measurement_raises() -> None:
    seen: list[int] = []
    with pytest.raises(RuntimeError), cores_kept_awake() as pids:
        seen += pids
        raise RuntimeError("the engine died")
    assert seen and not any(running(pid) for pid in seen)


# A parent killed outright (SIGKILL: no finally runs) must not leave its loops spinning.
_PARENT = """
import os, sys
from tokenpace.testing.awake import cores_kept_awake
with cores_kept_awake() as pids:
    print(" ".join(map(str, pids)), flush=True)
    os.kill(os.getpid(), 9)
"""


def test_the_loops_end_by_themselves_when_their_parent_is_killed() -> None:
    done = subprocess.run([sys.executable, "-c", _PARENT], capture_output=True, text=True, timeout=60)
    assert done.returncode == -9
    pids = [int(p) for p in done.stdout.split()]
    assert pids
    deadline = time.monotonic() + 10  # each loop checks its parent every few ms
    while any(running(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(running(pid) for pid in pids)
