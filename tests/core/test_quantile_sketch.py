"""The bounded streaming sketch: percentiles within its stated relative error of numpy's on the whole
sample, exact moments, fixed memory, merging equal to folding both, and the edges."""

from __future__ import annotations

import numpy as np
import pytest

from tokenpace.core.quantile_sketch import BUCKETS, MIN_VALUE, RELATIVE_ERROR, QuantileSketch
from tokenpace.core.stats import describe


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_percentiles_lie_within_the_relative_error_of_numpys(seed):
    rng = np.random.default_rng(seed)
    values = np.concatenate([rng.lognormal(3.0, 1.2, 30_000), rng.uniform(0.01, 2.0, 5_000)])
    sketch = QuantileSketch()
    for chunk in np.array_split(values, 7):  # batches as a caller's bounded buffer folds them
        sketch.add(chunk)
    got, exact = sketch.distribution(), describe(values, with_ci=False)
    for p in ("p50", "p90", "p95", "p99"):
        assert getattr(got, p) == pytest.approx(getattr(exact, p), rel=RELATIVE_ERROR)
    assert got.n == exact.n
    assert got.mean == pytest.approx(exact.mean, rel=1e-9)
    assert got.std == pytest.approx(exact.std, rel=1e-6)
    assert (got.min, got.max) == (exact.min, exact.max)
    assert got.ci95 == {}  # no samples kept: no interval claimed


def test_memory_does_not_grow_with_the_count():
    sketch = QuantileSketch()
    sketch.add(np.full(10, 5.0))
    size = sketch._counts.nbytes
    for _ in range(20):
        sketch.add(np.random.default_rng(0).exponential(100.0, 50_000))
    assert sketch._counts.nbytes == size == (BUCKETS + 1) * 8
    assert sketch.n == 1_000_010


def test_merge_equals_folding_both():
    rng = np.random.default_rng(4)
    a, b = rng.exponential(50.0, 3_000), rng.exponential(500.0, 2_000)
    one, two, both = QuantileSketch(), QuantileSketch(), QuantileSketch()
    one.add(a)
    two.add(b)
    both.add(np.concatenate([a, b]))
    one.merge(two)
    merged, folded = one.distribution(), both.distribution()
    for p in ("p50", "p90", "p95", "p99", "n", "min", "max"):
        assert getattr(merged, p) == getattr(folded, p)  # the same counts: the same percentiles
    assert merged.mean == pytest.approx(folded.mean, rel=1e-12)  # sums in another order


def test_edges_zero_tiny_and_huge_values_and_nothing():
    assert QuantileSketch().quantile(0.5) is None
    assert QuantileSketch().distribution().n == 0
    sketch = QuantileSketch()
    sketch.add(np.array([0.0, MIN_VALUE / 10, -1.0, 1e15]))  # a negative value counts as 0
    assert sketch.quantile(0.0) == 0.0
    assert sketch.quantile(1.0) == 1e15  # clamped to the exact maximum, past the last bucket
    assert sketch.distribution().low_sample == ["p50", "p90", "p95", "p99"]
