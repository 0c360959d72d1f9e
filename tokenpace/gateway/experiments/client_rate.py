"""A token bucket per client address, for what any client may post (outcome events).

Bounded: the newest ``max_clients`` addresses are remembered; an address evicted comes back with a
full bucket, so a client cycling through more addresses than that gets at most one burst each.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable


class ClientRate:
    def __init__(
        self, per_s: float, burst: float, clock: Callable[[], float], max_clients: int = 10_000
    ) -> None:
        self.per_s = per_s
        self.burst = burst
        self.clock = clock
        self.max_clients = max_clients
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()  # client -> (tokens, at)

    def take(self, client: str, n: int) -> bool:
        """Whether ``client`` may post ``n`` more now; if so they are taken from its bucket."""
        now = self.clock()
        tokens, at = self._buckets.pop(client, (self.burst, now))
        tokens = min(self.burst, tokens + (now - at) * self.per_s)
        allowed = n <= tokens
        self._buckets[client] = (tokens - n if allowed else tokens, now)
        if len(self._buckets) > self.max_clients:
            self._buckets.popitem(last=False)
        return allowed
