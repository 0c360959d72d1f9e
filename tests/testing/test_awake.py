"""The busy loops that keep the cores awake: one per core, at SCHED_IDLE, and always stopped."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tokenpace.testing.awake import cores_kept_awake, supported

pytestmark = pytest.mark.skipif(not supported(), reason="SCHED_IDLE is Linux-only")


def _children() -> set[int]:
    me = os.getpid()
    kids = Path(f"/proc/{me}/task/{me}/children")
    return {int(p) for p in kids.read_text().split()} if kids.exists() else set()


def test_one_idle_class_loop_per_core_and_none_left_after() -> None:
    before = _children()
    with cores_kept_awake() as started:
        spinners = _children() - before
        assert started == len(os.sched_getaffinity(0)) == len(spinners)
        for pid in spinners:  # the policy is set by the child itself: wait until it has
            deadline = time.monotonic() + 10  # a Python start-up, however busy the machine
            while os.sched_getscheduler(pid) != os.SCHED_IDLE and time.monotonic() < deadline:
                time.sleep(0.01)
            assert os.sched_getscheduler(pid) == os.SCHED_IDLE
            assert len(os.sched_getaffinity(pid)) == 1
    assert _children() == before


def test_the_loops_stop_when_the_measurement_raises() -> None:
    before = _children()
    with pytest.raises(RuntimeError), cores_kept_awake():
        raise RuntimeError("the engine died")
    assert _children() == before
