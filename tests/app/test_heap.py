"""The measured window runs on a frozen start-up heap, and unfreezes once, at the outermost end."""

from __future__ import annotations

import gc

from tokenpace.app.heap import frozen_heap


def test_the_heap_is_frozen_inside_and_released_by_the_outermost_window() -> None:
    gc.unfreeze()
    keep = [object() for _ in range(10)]  # something alive to freeze
    with frozen_heap():
        assert gc.get_freeze_count() > 0
        with frozen_heap():  # a sweep's step inside the sweep
            pass
        assert gc.get_freeze_count() > 0  # the inner end leaves the outer window frozen
    assert gc.get_freeze_count() == 0
    assert keep


def test_an_error_inside_still_unfreezes() -> None:
    gc.unfreeze()
    try:
        with frozen_heap():
            raise RuntimeError("boom")
    except RuntimeError:
        pass
    assert gc.get_freeze_count() == 0
