"""Choose the upstream for a request: by model, then by weight; sticky per user by rendezvous hashing.

Weighted rendezvous (highest random weight) hashing: each (user, upstream) pair gets a score
-w / ln(u); the top score wins. A user stays on their upstream while weights are stable, and when a
new upstream's weight ramps up only the users it wins over move, never users between old upstreams.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Callable, Sequence

from tokenpace.gateway.config.config import Upstream


def _unit(key: bytes, name: str) -> float:
    """A uniform number in (0, 1) from (key, name)."""
    digest = hashlib.blake2b(key + b"\x00" + name.encode(), digest_size=8).digest()
    return (int.from_bytes(digest, "big") + 0.5) / 2**64


class Router:
    def __init__(
        self,
        upstreams: Sequence[Upstream],
        clock: Callable[[], float],
        rng: random.Random | None = None,
        started: dict[str, float] | None = None,
    ) -> None:
        self.upstreams = tuple(upstreams)
        self.clock = clock
        now = clock()
        # when each upstream joined (its ramp runs from then): kept across a live change
        self.started = {u.name: (started or {}).get(u.name, now) for u in self.upstreams}
        self.rng = rng or random.Random()

    def after_change(self, upstreams: Sequence[Upstream]) -> Router:
        """The router of a changed config: an upstream kept (same name, URL and ramp) keeps its
        ramp's start; a new or changed one starts its ramp now. Sticky users keep their arm while
        its weight does not fall (rendezvous hashing: only the users a grown arm wins over move)."""
        old = {u.name: u for u in self.upstreams}
        kept = {
            u.name: self.started[u.name]
            for u in upstreams
            if u.name in old and (old[u.name].url, old[u.name].ramp_s) == (u.url, u.ramp_s)
        }
        return Router(upstreams, self.clock, self.rng, kept)

    def weight(self, u: Upstream) -> float:
        """Configured weight, scaled by the ramp while the upstream is warming up."""
        if u.ramp_s <= 0:
            return u.weight
        elapsed = self.clock() - self.started.get(u.name, self.clock())
        return u.weight * min(1.0, max(0.0, elapsed / u.ramp_s))

    def candidates(self, model: str | None) -> tuple[Upstream, ...]:
        """Upstreams serving this model; else those without a model; else all."""
        exact = tuple(u for u in self.upstreams if model is not None and u.model == model)
        if exact:
            return exact
        generic = tuple(u for u in self.upstreams if u.model is None)
        return generic or self.upstreams

    def choose(self, model: str | None, sticky_key: bytes | None) -> Upstream:
        pool = self.candidates(model)
        weights = [self.weight(u) for u in pool]
        if not any(w > 0 for w in weights):
            # Every candidate is at zero (e.g. all ramping from their start): serve anyway.
            weights = [1.0] * len(pool)
        if len(pool) == 1:
            return pool[0]
        if sticky_key is None:
            return self.rng.choices(pool, weights)[0]
        best, best_score = pool[0], -math.inf
        for u, w in zip(pool, weights, strict=True):
            if w <= 0:
                continue
            score = -w / math.log(_unit(sticky_key, u.name))
            if score > best_score:
                best, best_score = u, score
        return best


class UpstreamLoad:
    """Requests in flight on each upstream in this process: what a request's record says its
    upstream carried when it was sent (``upstream_inflight``), so that arms are compared at the
    same load. One int per upstream with a request in flight (an idle upstream's entry is removed):
    bounded by the configured upstreams, a dict lookup per request, nothing per token."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}

    def enter(self, name: str) -> int:
        """One more request on ``name``; returns how many were in flight on it before this one."""
        before = self.counts.get(name, 0)
        self.counts[name] = before + 1
        return before

    def leave(self, name: str) -> None:
        left = self.counts.get(name, 1) - 1
        if left > 0:
            self.counts[name] = left
        else:
            self.counts.pop(name, None)
