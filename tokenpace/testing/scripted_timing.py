"""Server-wide timing for the scripted server: what one request's ``Script`` cannot say alone.

- ``drift_ms_per_s``: the first token comes this many ms later for every second the server has been
  up (latency that moves with wall-clock time only, no capacity limit).
- ``slots``: at most this many streams are generated at once; the others wait in arrival order
  (a batch-slot limit: TTFT = the wait + ``ttft_s``; the queue is bounded by the client's load).
- ``slow_every`` / ``slow_ttft_s``: every k-th request's first token takes ``slow_ttft_s`` instead
  (bimodal latency).
- ``freeze_at_s`` / ``freeze_s``: from that second after start, nothing is written for ``freeze_s``
  (a server stall); what was due in the freeze goes out when it ends.
- ``speed_jitter`` / ``speed_period_s``: a quiet but noisy host. Every ``speed_period_s`` of server
  time the speed changes: TTFT and the gaps between tokens are multiplied by a factor drawn uniformly
  from 1 +- ``speed_jitter`` (``speed_seed``: the draws, repeatable). A sweep's steps each see their
  own speed, as runs on a real host do, and a step that spans a change sees a small step in latency.
- ``ttft_spread_s``: each stream's first token comes a further uniform 0 to ``ttft_spread_s`` later,
  drawn independently (``speed_seed``: the draws, repeatable): latency that varies request by request
  more than a busy host moves it, so the requests stay independent evidence.
"""

from __future__ import annotations

import math
import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Behaviour:
    drift_ms_per_s: float = 0.0
    slots: int | None = None
    slow_every: int = 0
    slow_ttft_s: float = 0.0
    freeze_at_s: float | None = None
    freeze_s: float = 0.0
    speed_jitter: float = 0.0  # e.g. 0.03: +-3 % speed, redrawn every speed_period_s
    speed_period_s: float = 1.0
    speed_seed: int = 0
    ttft_spread_s: float = 0.0


@dataclass
class Timing:
    """The state behind a ``Behaviour``, in event-loop time (seconds)."""

    behaviour: Behaviour
    started: float  # loop time the server started
    count: int = 0  # streams started so far
    active: int = 0  # streams holding a slot
    waiting: deque[Callable[[], None]] = field(default_factory=deque)  # bounded by the client's load
    factors: dict[int, float] = field(default_factory=dict)  # speed per period; bounded below
    spread: random.Random = field(init=False)  # ttft_spread_s's draws

    def __post_init__(self) -> None:
        self.spread = random.Random(self.behaviour.speed_seed)

    def speed(self, now: float) -> float:
        """The slowness factor at loop time ``now`` (1.0 without jitter)."""
        b = self.behaviour
        if b.speed_jitter <= 0:
            return 1.0
        period = max(0, math.floor((now - self.started) / b.speed_period_s))
        factor = self.factors.get(period)
        if factor is None:
            if len(self.factors) >= 4096:  # a long test: forget the oldest periods
                self.factors.pop(next(iter(self.factors)))
            rng = random.Random(b.speed_seed * 1_000_003 + period)
            factor = self.factors[period] = 1 + rng.uniform(-b.speed_jitter, b.speed_jitter)
        return factor

    def first_token_delay(self, ttft_s: float, now: float) -> float:
        """The TTFT of the next stream that starts generating at ``now``."""
        b = self.behaviour
        self.count += 1
        if b.slow_every and self.count % b.slow_every == 0:
            ttft_s = b.slow_ttft_s
        if b.ttft_spread_s > 0:
            ttft_s += self.spread.uniform(0, b.ttft_spread_s)
        return ttft_s * self.speed(now) + b.drift_ms_per_s / 1000 * (now - self.started)

    def after_freeze(self, due: float) -> float:
        """When something due at ``due`` is written: the end of the freeze if it falls inside it."""
        b = self.behaviour
        if b.freeze_at_s is None:
            return due
        start = self.started + b.freeze_at_s
        return start + b.freeze_s if start <= due < start + b.freeze_s else due

    def acquire(self, start: Callable[[], None]) -> None:
        """Start a stream now if a slot is free, else when one frees."""
        if self.behaviour.slots is None or self.active < self.behaviour.slots:
            self.active += 1
            start()
        else:
            self.waiting.append(start)

    def release(self) -> None:
        if self.behaviour.slots is None:
            return
        if self.waiting:
            self.waiting.popleft()()  # the slot passes on
        else:
            self.active = max(0, self.active - 1)
