"""Keep Python's full garbage collections out of measured time.

A process that imported numpy, aiohttp, rich and SQLAlchemy tracks ~35,000 objects; a generation-2
collection walks them all, and one fired inside a 256-stream run froze the loop for 46 ms (every
timestamp in that moment late). Moving everything that exists when the clock starts to the
permanent generation (``gc.freeze``, constant time) leaves the run's own collections to walk only
the objects the run made. No collection first: in a big process (a notebook, a test session) one
takes a second, and whatever garbage is frozen with the rest is collected after the window.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

_depth = 0  # frozen_heap nests (a sweep's steps, a repeat's runs): the outermost one unfreezes


@contextmanager
def frozen_heap() -> Iterator[None]:
    """For a measured window: freeze what exists, unfreeze after (so the run's records and everything
    else become collectable again)."""
    global _depth
    if _depth == 0:
        gc.freeze()
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
        if _depth == 0:
            gc.unfreeze()


def freeze_startup_heap() -> None:
    """For a long-lived server, once it is listening: what start-up built lives as long as the process,
    so no collection needs to walk it again."""
    gc.collect()
    gc.freeze()
