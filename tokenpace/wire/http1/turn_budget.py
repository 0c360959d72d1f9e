"""One loop's budget of parsing work per turn, shared by all its response connections.

Each connection used to have its own budget (128 parsed pieces a turn): twenty hostile upstreams
(one-byte HTTP chunks, CR-only lines cut into 3-byte chunks) took twenty budgets a turn together,
and the healthy streams and ``/metrics`` on the same loop waited behind all of them. Here one loop
turn parses at most ``UNITS_PER_TURN`` work units in all, however many connections: a unit is one
body piece handed up by the parser (an HTTP chunk's data) or one response head. A connection whose
read does not fit in what is left pauses reading, keeps the rest as its backlog and queues here; at
the start of the next turn the queue is served round-robin, each queued connection once, with an
equal share of the turn (``quantum``), so none starves and a healthy stream's read, a few units,
waits at most one turn while no more than ``UNITS_PER_TURN // MIN_QUANTUM`` connections queue.

The turn budget reads no clock and allocates nothing per piece: the turn is found by one
``call_soon`` in the first turn that spends anything, which refills the budget at the head of the
next turn (asyncio runs the callbacks scheduled during a turn before the I/O callbacks of the next).

``PieceRate`` is one connection's budget a second, on the loop's clock (``loop.time``): timed by
the clock, not by the time of the last read, so a connection whose reading is paused gets its budget
back as the time passes.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from collections import deque
from collections.abc import Callable
from typing import Protocol

UNITS_PER_TURN = 512  # parsed pieces and heads per loop turn, all connections together
MIN_QUANTUM = 8  # the least share a queued connection is served with (a healthy read is 1-3 units)
# A feed of ``UNIT_BYTES * n - 5`` bytes holds at most n units: two body pieces of one feed are
# split by a chunk boundary ("\r\n", a size digit, "\r\n") and each holds a data byte; a head is longer.
UNIT_BYTES = 6


def feed_bytes(units: int) -> int:
    """The most bytes one parser feed may take without possibly exceeding ``units`` units."""
    return UNIT_BYTES * units - 5


class Queued(Protocol):
    def take_turn(self, quantum: int) -> None:
        """Parses up to ``quantum`` units of its backlog (it queues again itself if some is left)."""


class TurnBudget:
    """Called on its loop only. ``left`` is read and spent by the connections directly (hot path)."""

    __slots__ = ("left", "loop", "refill_pending", "waiting")

    def __init__(self, loop: asyncio.AbstractEventLoop | None) -> None:
        # None: fed by hand outside any loop (unit tests): no turns to share, the budget never ends.
        self.loop = loop
        self.left = UNITS_PER_TURN if loop is not None else 1 << 62
        self.refill_pending = False
        self.waiting: deque[Queued] = deque()  # at most one entry per connection (its ``waiting`` flag)

    def spend(self, units: int) -> None:
        self.left -= units
        if not self.refill_pending and self.loop is not None:
            self.refill_pending = True
            self.loop.call_soon(self._refill)

    def wait(self, conn: Queued) -> None:
        """``conn`` is served in the next turn's round (behind those already queued)."""
        self.waiting.append(conn)
        if not self.refill_pending and self.loop is not None:
            self.refill_pending = True
            self.loop.call_soon(self._refill)

    def _refill(self) -> None:
        self.refill_pending = False
        self.left = UNITS_PER_TURN
        waiting = self.waiting
        n = len(waiting)
        if not n:
            return
        quantum = max(MIN_QUANTUM, UNITS_PER_TURN // n)
        for _ in range(n):  # each queued connection at most once a round, in queue order
            if self.left < MIN_QUANTUM:
                break  # the rest stay at the head of the queue: first next turn
            waiting.popleft().take_turn(min(quantum, self.left))
        if waiting and not self.refill_pending:
            self.refill_pending = True
            self.loop.call_soon(self._refill)  # type: ignore[union-attr]


class PieceRate:
    """One connection's budget of parsed pieces a second: a token bucket of ``per_second`` units
    (also its burst) refilled by the time that passed on ``clock`` (the loop's clock) when it runs
    out, so a peer past it is read at ``per_second`` and a connection that paused gets its budget
    back for the time it paused. The clock is read only when the bucket is empty (never on a
    healthy read)."""

    __slots__ = ("clock", "left", "per_second", "refilled")

    def __init__(self, per_second: int, clock: Callable[[], float]) -> None:
        self.per_second = per_second
        self.clock = clock
        self.left = float(per_second)
        self.refilled = clock()

    def spend(self, units: int) -> float:
        """Spends ``units``; 0.0 while some budget is left, else the seconds until there is some
        again (the caller waits that long, reading paused)."""
        self.left -= units
        if self.left > 0:
            return 0.0
        now = self.clock()
        rate = self.per_second
        # the bucket as it was before this spend, refilled and capped at the burst, then spent
        self.left = min(float(rate), self.left + units + (now - self.refilled) * rate) - units
        self.refilled = now
        return 0.0 if self.left > 0 else (1 - self.left) / rate


class _Waiter:
    """A task's place in the loop's round: its share is the result of ``future``."""

    __slots__ = ("future",)

    def __init__(self, future: asyncio.Future[int]) -> None:
        self.future = future

    def take_turn(self, quantum: int) -> None:
        if not self.future.done():  # a cancelled waiter passes its turn
            self.future.set_result(quantum)


async def next_turn(budget: TurnBudget) -> int:
    """Waits for ``budget``'s next round, behind the connections queued; returns the share the
    round granted (a task's work under the same budget as the parsers': the WebSocket relay)."""
    if budget.loop is None:
        return UNITS_PER_TURN
    waiter = _Waiter(budget.loop.create_future())
    budget.wait(waiter)
    return await waiter.future


def loop_clock() -> Callable[[], float]:
    """The running loop's clock (``loop.time``); the monotonic clock outside any loop."""
    try:
        return asyncio.get_running_loop().time
    except RuntimeError:
        return time.monotonic


_BUDGETS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, TurnBudget] = weakref.WeakKeyDictionary()


def turn_budget() -> TurnBudget:
    """The budget of the running loop (one per gateway or client process, one per test's loop)."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return TurnBudget(None)
    budget = _BUDGETS.get(loop)
    if budget is None:
        budget = _BUDGETS[loop] = TurnBudget(loop)
    return budget
