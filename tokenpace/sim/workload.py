"""What a virtual-time run sends: length distributions, arrival processes and rate ladders.

Length syntax (same as tokenpace bench): `512` fixed, `256:1024` uniform range, `normal:512,128`
normal (clipped to >= 1), `128,512,2048` an even mix of bins.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class LengthDist:
    kind: str  # fixed | uniform | normal | mix
    values: tuple[float, ...]

    @classmethod
    def parse(cls, text: str | int) -> LengthDist:
        s = str(text).strip()
        try:
            if s.startswith("normal:"):
                mean, sd = (float(x) for x in s[7:].split(","))
                if mean < 1 or sd < 0:
                    raise ValueError
                return cls("normal", (mean, sd))
            if ":" in s:
                lo, hi = (int(x) for x in s.split(":"))
                if not 1 <= lo <= hi:
                    raise ValueError
                return cls("uniform", (lo, hi))
            if "," in s:
                bins = tuple(int(x) for x in s.split(","))
                if min(bins) < 1:
                    raise ValueError
                return cls("mix", bins)
            n = int(s)
            if n < 1:
                raise ValueError
            return cls("fixed", (n,))
        except ValueError:
            raise ValueError(
                f"bad length {text!r}: use N, LO:HI, normal:MEAN,SD or N1,N2,... (all >= 1)"
            ) from None

    def sample(self, rng: random.Random) -> int:
        v = self.values
        if self.kind == "fixed":
            return int(v[0])
        if self.kind == "uniform":
            return rng.randint(int(v[0]), int(v[1]))
        if self.kind == "normal":
            return max(1, round(rng.gauss(v[0], v[1])))
        return int(rng.choice(v))


@dataclass(slots=True)
class Workload:
    """A workload for the virtual clock: either an open loop (rates) or a closed loop (concurrency)."""

    input_len: LengthDist = field(default_factory=lambda: LengthDist("fixed", (512,)))
    output_len: LengthDist = field(default_factory=lambda: LengthDist("fixed", (128,)))
    rates: tuple[float, ...] = ()  # req/s; several = a ladder, each step lasting step_duration_s
    arrival: str = "poisson"  # poisson | constant | gamma
    burstiness: float = 1.0  # gamma shape; 1 = poisson, < 1 burstier
    step_duration_s: float = 60.0
    concurrency: int = 0  # closed loop with this many users (when rates is empty)
    requests: int = 0  # closed loop: total requests (0: run for step_duration_s)
    shared_prefix: int = 0  # leading prompt tokens shared by every request (a system prompt)
    seed: int = 0

    def validate(self) -> None:
        if not self.rates and self.concurrency <= 0:
            raise ValueError("give a rate (or a ladder of rates) or a concurrency")
        if any(r <= 0 for r in self.rates):
            raise ValueError("rates must be > 0")
        if self.arrival not in ("poisson", "constant", "gamma"):
            raise ValueError(f"unknown arrival process {self.arrival!r}")
        if self.burstiness <= 0 or self.step_duration_s <= 0:
            raise ValueError("burstiness and step duration must be > 0")


def arrival_times(w: Workload, rng: random.Random) -> list[tuple[float, int]]:
    """Open-loop send times with the ladder step each belongs to."""
    out: list[tuple[float, int]] = []
    for k, rate in enumerate(w.rates):
        t0, t1 = k * w.step_duration_s, (k + 1) * w.step_duration_s
        t = t0
        while True:
            if w.arrival == "constant":
                gap = 1.0 / rate
            elif w.arrival == "gamma":
                gap = rng.gammavariate(w.burstiness, 1.0 / (rate * w.burstiness))
            else:
                gap = rng.expovariate(rate)
            t += gap
            if t >= t1:
                break
            out.append((t, k))
    return out


_FILLER = ("lorem ipsum dolor sit amet consectetur adipiscing elit " * 4096).split()


def prompt_words(index: int, n: int, shared_prefix: int) -> list[str]:
    """A prompt of n tokens; the first `shared_prefix` are the same for every request, the rest unique.

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
