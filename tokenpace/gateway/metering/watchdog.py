"""One timer per request enforcing the first-token and stall timeouts without a timer op per chunk.

A chunk only stores the loop time; the timer, when it fires, re-arms itself at the real deadline
if something arrived meanwhile. On expiry it cancels the request's task and says why.

Two clocks: no token for too long (the first-token timeout, then the stall timeout between
tokens), and an event begun but not finished within the stall timeout (bytes that never make a
complete event: an endless or dripping line), whether or not a token came before.

While the relay holds the upstream back because the client is not reading (``hold``), neither clock
blames the upstream: a client that reads nothing for the stall timeout is cut as ``client_slow``.
"""

from __future__ import annotations

import asyncio

from tokenpace.gateway.metering.outcome import Outcome


class Watchdog:
    __slots__ = (
        "_handle",
        "fired",
        "first_token_s",
        "held_since",
        "last",
        "loop",
        "partial_since",
        "stall_s",
        "started",
        "task",
        "token",
        "why",
    )

    def __init__(self, first_token_s: float, stall_s: float) -> None:
        self.loop = asyncio.get_running_loop()
        self.task = asyncio.current_task()
        self.first_token_s = first_token_s
        self.stall_s = stall_s
        self.started = self.last = self.loop.time()
        self.token = False  # a first token has been seen: the stall timeout applies from now on
        self.partial_since: float | None = None  # when the unfinished event began
        self.held_since: float | None = None  # when the relay paused the upstream for the client
        self.fired: Outcome | None = None
        self.why = ""
        deadline = self.started + first_token_s
        self._handle: asyncio.TimerHandle | None = self.loop.call_at(deadline, self._check)

    def activity(self, token_seen: bool) -> None:
        self.last = self.loop.time()
        self.token = token_seen

    def hold(self, held: bool) -> None:
        """The client stopped reading (upstream paused) or read again (resumed: the clocks restart,
        as the upstream could send nothing meanwhile)."""
        now = self.loop.time()
        if held:
            self.held_since = now
            return
        self.held_since = None
        self.last = now
        if self.partial_since is not None:
            self.partial_since = now
        if not self.token:
            self.started = now

    def partial(self, pending: bool) -> None:
        """After each body piece: is an event begun and not yet finished?"""
        if not pending:
            self.partial_since = None
        elif self.partial_since is None:
            self.partial_since = self.loop.time()
            if self._handle is not None and self.partial_since + self.stall_s < self._handle.when():
                self._handle.cancel()  # this deadline comes first: be there on time
                self._handle = self.loop.call_at(self.partial_since + self.stall_s, self._check)

    def _deadline(self) -> float:
        if self.held_since is not None:
            return self.held_since + self.stall_s
        deadline = self.last + self.stall_s if self.token else self.started + self.first_token_s
        if self.partial_since is not None:
            deadline = min(deadline, self.partial_since + self.stall_s)
        return deadline

    def _check(self) -> None:
        deadline = self._deadline()
        now = self.loop.time()
        if now < deadline:
            self._handle = self.loop.call_at(deadline, self._check)
            return
        self._handle = None
        if self.held_since is not None:
            self.fired = Outcome.CLIENT_SLOW
            self.why = f"client read nothing for {self.stall_s:g} s"
        elif self.partial_since is not None and now >= self.partial_since + self.stall_s:
            self.fired = Outcome.STALL
            self.why = f"bytes but no complete event for {self.stall_s:g} s"
        elif self.token:
            self.fired = Outcome.STALL
            self.why = f"no token for {self.stall_s:g} s"
        else:
            self.fired = Outcome.TIMEOUT_BEFORE_FIRST_TOKEN
            self.why = f"no token for {self.first_token_s:g} s"
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
