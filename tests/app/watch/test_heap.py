"""The measured window runs on a frozen start-up heap (unfrozen once, at the outermost end) and with
room made beforehand for its connections in the descriptor table."""

from __future__ import annotations

import gc

from tokenpace.app.watch.heap import frozen_heap


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


def test_a_run_makes_room_for_its_connections_before_the_clock() -> None:
    from tokenpace.app.bench.bench import connections_ahead
    from tokenpace.app.run.bench_config import BenchConfig

    closed = BenchConfig(url="http://127.0.0.1:1/v1", model="m", concurrency=256, requests=10)
    capped = BenchConfig(url="http://127.0.0.1:1/v1", model="m", rate=5.0, max_concurrency=40, requests=10)
    uncapped = BenchConfig(url="http://127.0.0.1:1/v1", model="m", rate=5.0, requests=10)
    assert connections_ahead(closed) == 2 * 256 + 64  # a first wave may open extras
    assert connections_ahead(capped) == 2 * 40 + 64
    assert connections_ahead(uncapped) == 4096
