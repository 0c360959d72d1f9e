"""One loop's deferred metering shared fairly between all streams, in rounds of bounded work.

Each stream's backlog (a read bigger than a slice, or a compressed piece past its inflation budget)
is worked through one slice at a time (relay.py). Scheduled per stream, every stream with a backlog
ran a slice in every loop turn: 20 streams each inflating a 4 MiB gzip made each turn ~10 ms, and a
healthy request, which needs several turns to get its first token, waited ~300 ms. Here all the
streams with a backlog take turns in one queue: a round runs their slices, round-robin, until
``ROUND_S`` of work is spent, and the rest waits for the next loop turn (the streams not reached
first next time). So however many streams are hostile, a loop turn holds at most about
``ROUND_S`` plus one slice of metering, and everything else on the loop gets its turn between.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from collections import deque
from collections.abc import Callable

ROUND_S = 0.002  # metering work per loop turn, all streams together (one slice runs past it at most)

Job = Callable[[], bool]  # runs one slice; True when that stream has more to do


class Turns:
    """Called on its loop only; it keeps no reference to the loop (the registry's key is weak)."""

    __slots__ = ("scheduled", "waiting")

    def __init__(self) -> None:
        self.waiting: deque[Job] = deque()  # one job per stream with a backlog, in the order to run
        self.scheduled = False

    def ask(self, job: Job) -> None:
        """Runs ``job`` in a coming round, and again in later ones while it returns True."""
        self.waiting.append(job)
        if not self.scheduled:
            self.scheduled = True
            asyncio.get_running_loop().call_soon(self._round)

    def _round(self) -> None:
        self.scheduled = False
        waiting = self.waiting
        deadline = time.perf_counter() + ROUND_S
        for _ in range(len(waiting)):  # each stream at most once a round
            job = waiting.popleft()
            if job():
                waiting.append(job)
            if time.perf_counter() >= deadline:
                break
        if waiting and not self.scheduled:
            self.scheduled = True
            asyncio.get_running_loop().call_soon(self._round)


_TURNS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Turns] = weakref.WeakKeyDictionary()


def turns_of(loop: asyncio.AbstractEventLoop) -> Turns:
    """The one queue of ``loop`` (a gateway process or a test has one per loop)."""
    turns = _TURNS.get(loop)
    if turns is None:
        turns = _TURNS[loop] = Turns()
    return turns
