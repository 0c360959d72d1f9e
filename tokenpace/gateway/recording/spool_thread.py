"""The spool's disk work off the event loop: ``--spool``'s records serialised, written and removed by
one daemon thread, handed over in order through a queue.

The loop only enqueues (``append``, ``stored``): a disk that stalls (dirty-page throttling, a slow
volume) or a record that is long to serialise never holds up another peer's stream. The thread
applies the operations in the order the loop made them, so the spool's files, indices and
"handled" mark are exactly those of a spool written in the loop (spool.py). The price is a short
window: a record whose line is still queued when the process is killed outright is lost with it,
as one whose answer ended in the same loop step already was.

Bounded: at most ``MAX_PENDING`` records wait for the thread; past that a record is not spooled
(counted in ``skipped``, as a full disk's are) and still goes to the store. ``close`` waits at most
its timeout for the queue to drain, then leaves the rest (counted) to the daemon thread.
"""

from __future__ import annotations

import queue
import threading
from pathlib import Path

from tokenpace.core.record import RequestRecord
from tokenpace.gateway.recording.spool import Spool

MAX_PENDING = 10_000  # records queued for the thread (the sink's own queue holds as many)

_APPEND, _SKIP, _STORED, _DISCARD, _CLOSE = range(5)


class SpoolThread:
    """A ``Spool`` driven from the loop: the same interface, its disk work in a thread."""

    def __init__(self, spool: Spool) -> None:
        self.spool = spool
        self.folder: Path = spool.folder
        self._ops: queue.SimpleQueue[tuple[int, RequestRecord | int | None]] = queue.SimpleQueue()
        self._queued = 0  # records enqueued by the loop (appended or skipped)
        self._done = 0  # of them, applied by the thread
        self._skipped_here = 0  # not queued: past MAX_PENDING
        self.left_unwritten = 0  # records still queued when ``close`` gave up waiting
        self._thread = threading.Thread(target=self._serve, name="tokenpace-spool", daemon=True)
        self._thread.start()

    # what the startup reads synchronously, before anything is queued
    def leftovers(self) -> list[RequestRecord]:
        return self.spool.leftovers()

    def discard_leftovers(self) -> None:
        """Queued: the old files go only once the leftovers appended again are on disk."""
        self._ops.put((_DISCARD, None))

    @property
    def replayed(self) -> int:
        return self.spool.replayed

    @property
    def unreadable(self) -> int:
        return self.spool.unreadable

    @property
    def skipped(self) -> int:
        return self.spool.skipped

    @property
    def pending(self) -> int:
        return self._queued - self._done

    def append(self, record: RequestRecord) -> None:
        """On the loop: O(1), never blocks, never raises."""
        self._queued += 1
        if self._queued - self._done > MAX_PENDING:
            self._ops.put((_SKIP, None))
        else:
            self._ops.put((_APPEND, record))

    def stored(self, n: int) -> None:
        """On the loop: the writer handled the next ``n`` records (applied after their appends)."""
        self._ops.put((_STORED, n))

    def close(self, timeout_s: float = 10.0) -> None:
        """Drain the queue within ``timeout_s``, then close the spool's files."""
        self._ops.put((_CLOSE, None))
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            self.left_unwritten = self.pending

    def _serve(self) -> None:
        spool = self.spool
        while True:
            op, arg = self._ops.get()
            try:
                if op == _APPEND and isinstance(arg, RequestRecord):
                    spool.append(arg)
                elif op == _SKIP:
                    spool.skip()
                elif op == _STORED and isinstance(arg, int):
                    spool.stored(arg)
                elif op == _DISCARD:
                    spool.discard_leftovers()
                elif op == _CLOSE:
                    spool.close()
                    return
            except Exception:  # a record that will not serialise: not spooled, the thread goes on
                if op == _APPEND:
                    spool.skip()  # its index is still used (the writer counts it)
            finally:
                if op in (_APPEND, _SKIP):
                    self._done += 1
