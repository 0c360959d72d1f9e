"""Per-request inter-token gaps bucketed as the tokens arrive, so a request's end costs one add per
bucket, not one histogram observation per gap (a stream of 2.7 M tiny events once froze the loop
for seconds at its end). Memory per request: one int per bucket, however long the stream.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence

from prometheus_client import Histogram

NS = 1e9


class ItlCounts:
    """Gaps between token-carrying chunks, in the ITL histogram's own buckets (Prometheus ``le``:
    a gap equal to a bound falls in that bound's bucket)."""

    __slots__ = ("bounds_ns", "counts", "last_ns", "n", "sum_ns")

    def __init__(self, bounds_ns: Sequence[int]) -> None:
        self.bounds_ns = bounds_ns  # finite upper bounds, ascending; one more bucket for +Inf
        self.counts = [0] * (len(bounds_ns) + 1)
        self.last_ns: int | None = None
        self.sum_ns = 0
        self.n = 0

    def note(self, now: int, chunks: int) -> None:
        """``chunks`` token-carrying chunks arrived together at ``now``: one real gap since the last
        token, then ``chunks - 1`` gaps of zero (the same gaps ``itl_gaps_ns`` reads off timestamps)."""
        if chunks <= 0:
            return
        zeros = chunks - 1
        if self.last_ns is not None:
            gap = now - self.last_ns
            self.counts[bisect_left(self.bounds_ns, gap)] += 1
            self.sum_ns += gap
            self.n += 1
        if zeros:
            self.counts[0] += zeros
            self.n += zeros
        self.last_ns = now

    def add_to(self, child: Histogram) -> None:
        """Adds every gap to one labelled histogram: one increment per non-empty bucket."""
        if not self.n:
            return
        buckets = child._buckets  # no public bulk add: one counter per bucket
        for i, c in enumerate(self.counts):
            if c:
                buckets[i].inc(c)
        child._sum.inc(self.sum_ns / NS)


def bounds_ns(buckets_s: Sequence[float]) -> list[int]:
    """The finite bucket bounds of a histogram, in integer nanoseconds (gap <= bound is inside)."""
    return [round(b * NS) for b in buckets_s if b != float("inf")]
