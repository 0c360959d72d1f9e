"""Counts how much of a compressed body one call inflates, for tests that a bomb is inflated a
bounded slice per call on the event loop, never whole."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tokenpace.wire import inflate


def largest_slice(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Patches ``Inflater.feed``; the returned list's one item is the most bytes one call gave."""
    largest = [0]
    feed = inflate.Inflater.feed

    def counted(self: inflate.Inflater, data: bytes, budget: int | None = None) -> Iterator[bytes]:
        n = 0
        for piece in feed(self, data, budget):
            n += len(piece)
            yield piece
        largest[0] = max(largest[0], n)

    monkeypatch.setattr(inflate.Inflater, "feed", counted)
    return largest
