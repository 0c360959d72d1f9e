"""The work all the response connections of one event loop share: body pieces parsed beyond each
connection's free share, per loop turn and per second.

Each connection has budgets of its own (``client.py``: PIECES_PER_TURN, PIECES_PER_SECOND), but
those grow with the number of peers: twenty peers each sending one byte per HTTP chunk, or short
streams of 7- and 3-byte chunks, together took twenty times one peer's work per turn and per second,
and a healthy stream's read waited behind all of them. So what a connection parses beyond a small
free share (``FREE_PIECES_PER_TURN``, ``FREE_PIECES_PER_SECOND``: more than a real stream's read or
second holds) is drawn from this pool; a connection that finds it spent waits for the next turn
(or second), reading paused. Healthy streams stay within their free share and never wait on it, and
N hostile peers together get the pool plus N free shares, not N times a peer's own budget.

The second's pool is drawn only by a connection past its free share of the turn too: one whose
reads stay within 16 pieces is bounded by its own per-second budget and by the loop's reads, one a
turn for each peer ready (the cost of a read, not of its pieces, dominates there), so a healthy
whole response of many 4 KiB slices never waits on hostile peers' second.
"""

from __future__ import annotations

import asyncio
import weakref

# A connection parses this much per turn and per second without drawing on the pool: a healthy
# read holds one to a few pieces; a healthy stream sends hundreds of tokens a second, at most.
FREE_PIECES_PER_TURN = 16
FREE_PIECES_PER_SECOND = 1_000
# What all the loop's connections together parse beyond their free shares.
LOOP_PIECES_PER_TURN = 512
LOOP_PIECES_PER_SECOND = 50_000
SECOND_NS = 1_000_000_000


class SharedPieces:
    """One loop's pool (``for_loop``). ``turn_left`` is refilled on the next turn after a draw
    (one ``call_soon``); ``second_left`` when a draw comes a second after the window began."""

    __slots__ = ("refill_due", "second_left", "turn_left", "window_ns")

    def __init__(self) -> None:
        self.turn_left = LOOP_PIECES_PER_TURN
        self.second_left = LOOP_PIECES_PER_SECOND
        self.window_ns = 0  # when the current second began (arrival stamps, no clock read here)
        self.refill_due = False

    def draw(self, turn: int, second: int, now: int) -> None:
        if now - self.window_ns >= SECOND_NS:
            self.window_ns, self.second_left = now, LOOP_PIECES_PER_SECOND
        self.turn_left -= turn
        self.second_left -= second
        if turn and not self.refill_due:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:  # no loop, no turns: nothing to share
                self.turn_left = LOOP_PIECES_PER_TURN
                return
            self.refill_due = True
            loop.call_soon(self._refill)

    def _refill(self) -> None:
        self.turn_left, self.refill_due = LOOP_PIECES_PER_TURN, False

    def next_second_s(self, now: int) -> float:
        """Seconds from ``now`` until the pool's second ends."""
        return max(0.0, (self.window_ns + SECOND_NS - now) / 1e9)


_POOLS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, SharedPieces] = weakref.WeakKeyDictionary()


def for_loop() -> SharedPieces:
    """The running loop's pool (one per loop: a gateway worker process has its own); a private one
    when no loop runs (a connection driven by hand, in tests)."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return SharedPieces()
    pool = _POOLS.get(loop)
    if pool is None:
        pool = _POOLS[loop] = SharedPieces()
    return pool
