"""One run's schedule dealt to several worker processes, so that N workers send what one would.

Open loop: request ``i`` keeps arrival offset ``i`` of the single-process schedule and goes to
worker ``i % N`` (round-robin). Closed loop: the users are split evenly (the first workers take one
more when they do not divide) and request ``i`` goes to the worker that owns user ``i % users``,
so each worker gets requests in proportion to its users. Pure: the same answer in every process.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

# One worker keeps its timestamps at the floor up to about 30,000 token chunks/s on one core
# (BENCHMARKS.md: Poisson 600 req/s x 64 tokens went invalid); `auto` plans for half of that.
EVENTS_PER_WORKER = 15_000.0


@dataclass(frozen=True, slots=True)
class UserShare:
    first_user: int  # global number of the worker's first closed-loop user
    users: int


def split_users(users: int, workers: int) -> list[UserShare]:
    """Closed loop: ``users`` split evenly over ``workers`` (at most one user apart)."""
    if users < 1 or workers < 1:
        raise ValueError("users and workers must be at least 1")
    base, extra = divmod(users, workers)
    shares: list[UserShare] = []
    first = 0
    for w in range(workers):
        n = base + (1 if w < extra else 0)
        shares.append(UserShare(first, n))
        first += n
    return shares


def owner_of(index: int, workers: int, users: int | None = None) -> int:
    """The worker that sends request ``index``: round-robin (open loop), or the owner of user
    ``index % users`` (closed loop, ``users`` given)."""
    if users is None:
        return index % workers
    user = index % users
    base, extra = divmod(users, workers)
    # the first `extra` workers own base + 1 users each, the rest base each
    big = extra * (base + 1)
    if user < big:
        return user // (base + 1)
    return extra + (user - big) // base


def dealt_offsets(offsets: Sequence[float], worker: int, workers: int) -> list[float]:
    """Open loop: the arrival offsets of the requests worker ``worker`` sends, in its order."""
    return list(offsets[worker::workers])


def workers_needed(rate: float | None, users: int | None, mean_output_tokens: float, cores: int) -> int:
    """``--workers auto``: as many workers as the asked load needs (token chunks per second against
    ``EVENTS_PER_WORKER``), at least one, at most one per core; a closed loop never gets more
    workers than users. A closed loop's event rate is not known before the run: one per 128 users."""
    if rate is not None:
        events = rate * (mean_output_tokens + 1)  # + 1: the request itself
        need = int(-(-events // EVENTS_PER_WORKER))
    else:
        need = -(-(users or 1) // 128)
    need = max(1, min(need, max(cores, 1)))
    return min(need, users) if users else need
