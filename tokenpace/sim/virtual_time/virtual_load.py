"""The load a virtual-time run offers: rate ladders or a closed loop, on the core's workload pieces.

Lengths are the core's `LengthDist` (every form `tokenpace bench` accepts: ``512``, ``256:1024``,
``normal:512,128``, ``lognormal:512,0.5``, ``128,512,2048``, ``128@3,2048@1``) and send times come
from the core's `arrival_offsets_s`; what is the simulator's own is the ladder of rate steps and the
filler prompts the engine model hashes for its prefix cache.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import chain
from typing import Any

import numpy as np

from tokenpace.core.schedule.arrivals import ARRIVALS, arrival_offsets_s
from tokenpace.core.workload.lengths import LengthDist, parse_length


@dataclass(slots=True)
class VirtualLoad:
    """What a virtual-time run sends: an open loop (a ladder of rates) or a closed loop (users)."""

    input_len: LengthDist = field(default_factory=lambda: parse_length("512"))
    output_len: LengthDist = field(default_factory=lambda: parse_length("128"))
    rates: tuple[float, ...] = ()  # req/s; several = a ladder, each step lasting step_duration_s
    arrival: str = "poisson"  # poisson | constant | gamma
    burstiness: float = 1.0  # gamma shape; 1 = poisson, < 1 burstier
    step_duration_s: float = 60.0
    concurrency: int = 0  # closed loop with this many users (when rates is empty)
    requests: int = 0  # closed loop: total requests (0: run for step_duration_s)
    shared_prefix: int = 0  # leading prompt tokens shared by every request (a system prompt)
    seed: int = 0
    # Open loop replayed as it was sent: (send time s, input tokens, output tokens) per request, in
    # place of rates and length draws (`tokenpace sim --validate` replays a measured run this way).
    sends: tuple[tuple[float, int, int], ...] = ()

    def validate(self) -> None:
        if not self.rates and self.concurrency <= 0 and not self.sends:
            raise ValueError("give a rate (or a ladder of rates) or a concurrency")
        if any(r <= 0 for r in self.rates):
            raise ValueError("rates must be > 0")
        if self.arrival not in ARRIVALS:
            raise ValueError(f"unknown arrival process {self.arrival!r}; choose from {', '.join(ARRIVALS)}")
        if self.burstiness <= 0 or self.step_duration_s <= 0:
            raise ValueError("burstiness and step duration must be > 0")

    def conditions(self) -> dict[str, Any]:
        """The load as written next to the results."""
        return {
            "input_len": self.input_len.describe(),
            "output_len": self.output_len.describe(),
            "rates": list(self.rates),
            "arrival": self.arrival,
            "burstiness": self.burstiness,
            "step_duration_s": self.step_duration_s,
            "concurrency": self.concurrency,
            "requests": self.requests,
            "shared_prefix": self.shared_prefix,
            "seed": self.seed,
        }


def ladder_send_times(load: VirtualLoad, rng: np.random.Generator) -> Iterator[tuple[float, int]]:
    """Open-loop send times (seconds from the run's start) with the ladder step each belongs to.

    Each step runs the core's arrival process at its rate from the step's start to its end.
    """
    for step, rate in enumerate(load.rates):
        start, end = step * load.step_duration_s, (step + 1) * load.step_duration_s
        for offset in arrival_offsets_s(rate, load.arrival, rng, load.burstiness):
            if start + offset >= end:
                break
            yield start + offset, step


class LengthDraws:
    """The n-th request's length is the n-th draw, drawn in blocks (one numpy call per 1024), read
    one at a time by `next()` (a C-level iterator: no Python call per draw)."""

    __slots__ = ("next",)

    def __init__(self, dist: LengthDist, rng: np.random.Generator) -> None:
        blocks: Iterator[list[int]] = iter(lambda: dist.sample(rng, 1024).tolist(), None)
        self.next: Callable[[], int] = chain.from_iterable(blocks).__next__


_FILLER = ("lorem ipsum dolor sit amet consectetur adipiscing elit " * 4096).split()


def filler_prompt(index: int, n: int, shared_prefix: int) -> list[str]:
    """A prompt of n word-tokens; the first `shared_prefix` are the same for every request, the rest unique.

    Uniqueness comes from a per-request tag right after the shared part, which changes the hash chain
    of every later block, so only the shared part can hit the prefix cache.
    """
    shared = min(shared_prefix, n)
    words = ["system"] * shared
    if n > shared:
        words.append(f"req{index}")
        rest = n - shared - 1
        while rest > len(_FILLER):
            words += _FILLER
            rest -= len(_FILLER)
        words += _FILLER[:rest]
    return words


# Request indices stay below this (a day at 100 req/s is 2^23): unique hashes never overlap.
_REQUESTS = 1 << 32


def filler_block_hashes(index: int, n: int, shared_prefix: int, block_size: int) -> list[int]:
    """Block hashes equivalent to `block_hashes(filler_prompt(index, n, shared_prefix), block_size)`.

    The prefix cache only compares hashes, so any values with the same equalities do: a full block of
    the shared part is the same for every request (its hash is its position, negative), every block
    from the request's tag on is its own (request index + position x 2^32: the low bits vary with
    the request, so the cache's dict spreads them). No words are made and nothing is hashed, which
    a virtual run would otherwise do for every prompt block.
    """
    if index >= _REQUESTS:
        raise ValueError("a virtual run of more than 2^32 requests")
    full = n // block_size
    shared = min(min(shared_prefix, n) // block_size, full)
    out = list(range(-1, -shared - 1, -1)) if shared else []
    for i in range(shared, full):  # a loop, not star-unpacking: compiled (native.py), this is C
        out.append(index + i * _REQUESTS)
    return out
