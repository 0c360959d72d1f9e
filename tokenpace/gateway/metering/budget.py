"""One memory budget for the response bodies all requests hold to measure them.

A non-streamed body is kept (up to 8 MiB, meter.py) until it is complete, to be parsed once. Forty
clients that never read such a response once held 200 MB. The budget bounds the sum: past it a
body is forwarded but not kept (the request is recorded as not measurable), and new non-streamed
requests are refused early with a 503 until enough is given back.
"""

from __future__ import annotations

HELD_BYTES_LIMIT = 256 * 1024 * 1024


class Budget:
    __slots__ = ("held", "limit")

    def __init__(self, limit: int = HELD_BYTES_LIMIT) -> None:
        self.limit = limit
        self.held = 0

    def take(self, n: int) -> bool:
        """Whether ``n`` more bytes may be held; if so they are counted as held."""
        if self.held + n > self.limit:
            return False
        self.held += n
        return True

    def give_back(self, n: int) -> None:
        self.held = max(0, self.held - n)

    @property
    def exhausted(self) -> bool:
        """Nearly all taken: no new non-streamed work until some is given back."""
        return self.held >= self.limit * 0.9
