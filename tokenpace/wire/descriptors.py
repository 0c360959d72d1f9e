"""Grow the process's descriptor table before a burst of new connections, not during it.

Linux keeps each process's open files in one table that doubles when a new descriptor does not fit
(past 64, 128, 256, 512, ...). In a process with more than one thread (numpy's, a records thread)
the kernel waits for an RCU grace period before it frees the old table, and the ``socket()`` call
that crossed the line blocks meanwhile: 5-12 ms measured on this project's VM, the 241st new
connection of a 256-stream first wave, with every stream's timestamps late by as much. The table
never shrinks, so taking one descriptor high up once, before the clock starts, moves that wait out
of the measured window. The cost is the table itself (8 bytes a slot), bounded by the open-files
limit and by ``MAX_RESERVED``.
"""

from __future__ import annotations

import os

MAX_RESERVED = 65_536  # slots (512 KiB of kernel memory at most)


def reserve_descriptors(count: int) -> int:
    """Make room for ``count`` more descriptors than are open now; returns the highest descriptor
    number the table now holds (0 where nothing could be done: no ``fcntl``, a limit, an error)."""
    try:
        import fcntl
        import resource
    except ImportError:  # not a Unix: nothing to grow ahead
        return 0
    try:
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        probe = os.open(os.devnull, os.O_RDONLY)  # the lowest free descriptor
    except (OSError, ValueError):
        return 0
    try:
        target = probe + min(max(count, 0), MAX_RESERVED)
        if soft != resource.RLIM_INFINITY:
            target = min(target, soft - 1)
        if target <= probe:
            return 0
        # F_DUPFD takes the lowest free descriptor at or above target: never one in use (dup2 would).
        high = fcntl.fcntl(probe, fcntl.F_DUPFD, target)
        os.close(high)
        return high
    except OSError:
        return 0
    finally:
        os.close(probe)
