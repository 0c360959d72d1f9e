"""The descriptor table grows before a burst, never past the open-files limit, never over an open file."""

from __future__ import annotations

import os
import resource
import sys
from pathlib import Path

import pytest

from tokenpace.wire.descriptors import MAX_RESERVED, reserve_descriptors

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")


def _table_size() -> int:
    """The kernel's descriptor table size for this process (Linux's FDSize)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("FDSize:"):
            return int(line.split()[1])
    raise AssertionError("no FDSize in /proc/self/status")


def test_table_holds_the_reserved_descriptors_afterwards() -> None:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(3000, soft - 100)
    high = reserve_descriptors(want)
    assert high >= want  # the next `want` sockets fit without growing the table
    assert _table_size() > high
    with pytest.raises(OSError):  # the high descriptor was a probe, closed again
        os.fstat(high)


def test_never_takes_a_descriptor_in_use_and_closes_what_it_opened() -> None:
    before = set(os.listdir("/proc/self/fd"))
    busy = os.open(os.devnull, os.O_RDONLY)
    try:
        high = reserve_descriptors(1)
        assert high != busy
        os.fstat(busy)  # still open, still ours
    finally:
        os.close(busy)
    assert set(os.listdir("/proc/self/fd")) == before


def test_stays_under_the_open_files_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    low = min(soft, 200)
    resource.setrlimit(resource.RLIMIT_NOFILE, (low, hard))
    try:
        high = reserve_descriptors(MAX_RESERVED * 4)
        assert 0 < high <= low - 1
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_nothing_to_do_for_no_descriptors() -> None:
    assert reserve_descriptors(0) == 0
    assert reserve_descriptors(-5) == 0
