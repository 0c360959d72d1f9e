"""The one streaming sketch (core/sketch.py) beyond what the running summary's tests cover: merging two
sketches equals folding both, memory that does not grow, and the edges."""

from __future__ import annotations

import numpy as np
import pytest

from tokenpace.core.sketch import BUCKETS, MIN_VALUE, LogSketch


def test_merge_equals_folding_both() -> None:
    rng = np.random.default_rng(4)
    a, b = rng.exponential(50.0, 3_000), rng.exponential(500.0, 2_000)
    one, two, both = LogSketch(), LogSketch(), LogSketch()
    one.add_many(a)
    two.add_many(b)
    both.add_many(np.concatenate([a, b]))
    one.merge(two)
    merged, folded = one.distribution(), both.distribution()
    for p in ("p50", "p90", "p95", "p99", "n", "min", "max"):
        assert getattr(merged, p) == getattr(folded, p)  # the same counts: the same percentiles
    assert merged.mean == pytest.approx(folded.mean, rel=1e-12)  # sums in another order
    assert merged.std == pytest.approx(folded.std, rel=1e-9)
    empty = LogSketch()
    empty.merge(LogSketch())
    assert empty.n == 0


def test_memory_does_not_grow_with_the_count() -> None:
    sketch = LogSketch()
    size = sketch.counts.nbytes
    for _ in range(20):
        sketch.add_many(np.random.default_rng(0).exponential(100.0, 50_000))
    assert sketch.counts.nbytes == size == BUCKETS * 8 and sketch.n == 1_000_000


def test_edges_zero_tiny_huge_and_nothing() -> None:
    assert LogSketch().percentiles([50]) == [] and LogSketch().distribution().n == 0
    sketch = LogSketch()
    sketch.add_many(np.array([0.0, MIN_VALUE / 10, 1e15]))
    assert sketch.percentiles([0, 100]) == [0.0, 1e15]  # the exact extremes, past the last bucket
    assert sketch.distribution().low_sample == ["p50", "p90", "p95", "p99"]


def test_the_sketch_interval_holds_the_exact_interval_it_stands_for() -> None:
    # the order-statistic interval from the sketch's ranks, widened by its error, must contain the
    # interval describe() computes from the sorted values, and the exact percentile
    from tokenpace.core.stats import describe

    rng = np.random.default_rng(7)
    values = rng.lognormal(3.0, 0.8, 5000)
    sketch = LogSketch()
    sketch.add_many(values)
    approx = sketch.distribution(with_ci=True)
    exact = describe(values)
    assert not sketch.distribution().ci95  # off unless asked
    for key, (lo, hi) in exact.ci95.items():
        s_lo, s_hi = approx.ci95[key]
        assert s_lo <= lo and hi <= s_hi, (key, (s_lo, s_hi), (lo, hi))
        assert s_lo <= getattr(exact, key) <= s_hi
        assert s_hi - s_lo <= (hi - lo) + 0.05 * getattr(exact, key)  # not wider than the error allows
