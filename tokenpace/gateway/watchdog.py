"""One timer per request enforcing the first-token and stall timeouts without a timer op per chunk.

A chunk only stores the loop time; the timer, when it fires, re-arms itself at the real deadline
if something arrived meanwhile. On expiry it cancels the request's task and says why.
"""

from __future__ import annotations

import asyncio

from tokenpace.gateway.outcome import Outcome


class Watchdog:
    __slots__ = ("_handle", "fired", "first_token_s", "last", "loop", "stall_s", "started", "task", "token")

    def __init__(self, first_token_s: float, stall_s: float) -> None:
        self.loop = asyncio.get_running_loop()
        self.task = asyncio.current_task()
        self.first_token_s = first_token_s
        self.stall_s = stall_s
        self.started = self.last = self.loop.time()
        self.token = False  # a first token has been seen: the stall timeout applies from now on
        self.fired: Outcome | None = None
        deadline = self.started + first_token_s
        self._handle: asyncio.TimerHandle | None = self.loop.call_at(deadline, self._check)

    def activity(self, token_seen: bool) -> None:
        self.last = self.loop.time()
        self.token = token_seen

    def _deadline(self) -> float:
        if self.token:
            return self.last + self.stall_s
        return self.started + self.first_token_s

    def _check(self) -> None:
        deadline = self._deadline()
        if self.loop.time() < deadline:
            self._handle = self.loop.call_at(deadline, self._check)
            return
        self._handle = None
        self.fired = Outcome.STALL if self.token else Outcome.TIMEOUT_BEFORE_FIRST_TOKEN
        if self.task is not None:
            self.task.cancel()

    def cancel(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def absorb(self) -> None:
        """After catching the CancelledError this watchdog caused: let the task go on."""
        uncancel = getattr(self.task, "uncancel", None)  # Python 3.11+
        if uncancel is not None:
            uncancel()
