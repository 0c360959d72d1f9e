import numpy as np
import pytest

from tokenpace.core.stats import describe, enough_samples, percentile_ci, robust_sd, samples_needed


def test_percentiles_interpolate_linearly():
    d = describe([1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
    # numpy linear: position (n-1)*q = 9*0.5 = 4.5 -> between 5 and 6
    assert d.p50 == pytest.approx(5.5)
    assert d.p90 == pytest.approx(9.1)
    assert d.p99 == pytest.approx(9.91)
    assert (d.n, d.min, d.max, d.mean) == (10, 1, 10, 5.5)


def test_small_sample_percentiles_are_flagged():
    d = describe(list(range(50)))
    assert "p99" in d.low_sample and "p95" in d.low_sample
    assert "p50" not in d.low_sample
    assert enough_samples(500, 99) and not enough_samples(499, 99)


def test_empty_sample_has_no_numbers():
    d = describe([])
    assert d.n == 0 and d.p50 is None and d.to_dict()["p99"] is None


def test_interval_contains_the_estimate_and_narrows_with_n():
    rng = np.random.default_rng(1)
    small = np.sort(rng.exponential(100, 100))
    large = np.sort(rng.exponential(100, 3000))
    lo_s, hi_s = percentile_ci(small, 95)
    lo_l, hi_l = percentile_ci(large, 95)
    assert lo_s <= np.percentile(small, 95) <= hi_s
    assert lo_l <= np.percentile(large, 95) <= hi_l
    assert (hi_l - lo_l) < (hi_s - lo_s)


def test_order_statistic_interval_for_huge_samples_covers_truth():
    rng = np.random.default_rng(2)
    values = np.sort(rng.uniform(0, 1, 200_000))
    lo, hi = percentile_ci(values, 99)
    assert lo < 0.99 < hi
    assert hi - lo < 0.002


@pytest.mark.parametrize("n, q", [(100, 50), (100, 90), (100, 95), (1000, 99), (3000, 99)])
def test_intervals_cover_the_true_percentile_at_their_stated_rate(n, q):
    """Distribution-free: exponential latencies, the true percentile known; the 95% interval must
    hold it in about 95% of samples (at least 93% of 600 seeded trials), exact and approximate."""
    rng = np.random.default_rng(n + q)
    true = -np.log(1 - q / 100)
    trials = 600
    hits = 0
    for _ in range(trials):
        lo, hi = percentile_ci(np.sort(rng.exponential(1.0, n)), q)
        hits += lo <= true <= hi
    assert hits / trials >= 0.93


def test_robust_sd_is_the_normal_sd_and_ignores_a_few_stalls() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(0.0, 2.0, 20_000)
    assert robust_sd(x) == pytest.approx(2.0, rel=0.03)
    stalled = np.concatenate([x, [1e6] * 100])  # half a percent of stalls, each enormous
    assert robust_sd(stalled) == pytest.approx(2.0, rel=0.03)
    assert robust_sd([3.0, 3.0, 3.0]) == 0.0


@pytest.mark.parametrize("p", [50, 90, 95, 99, 99.9])
def test_samples_needed_is_the_first_count_with_enough_beyond_the_percentile(p):
    n = samples_needed(p)
    assert enough_samples(n, p) and not enough_samples(n - 1, p)
