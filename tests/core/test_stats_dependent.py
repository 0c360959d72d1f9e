"""Percentile intervals of one run that count requests moving together: coverage on synthetic series
of known truth (seeded, vectorised generation, a few hundred trials)."""

from __future__ import annotations

import json
import math

import numpy as np

from tokenpace.core.stats import (
    band_correlation,
    dependent_rank_bounds,
    describe,
    design_effects,
    enough_samples,
    near_constant,
    open_sides,
    ordered_percentile_cis,
    percentile_cis,
)
from tokenpace.testing import dependent_series as ds

QS = [50.0, 95.0]


def _coverage(series: np.ndarray, truth: list[float]) -> tuple[np.ndarray, np.ndarray]:
    """Share of rows whose 95 % interval covers the truth: dependence-aware, and independent."""
    dep, iid = np.zeros(len(QS)), np.zeros(len(QS))
    for x in series:
        cis, _ = ordered_percentile_cis(x, QS)
        plain = percentile_cis(np.sort(x), QS)
        for j, t in enumerate(truth):
            dep[j] += cis[j][0] <= t <= cis[j][1]
            iid[j] += plain[j][0] <= t <= plain[j][1]
    return dep / len(series), iid / len(series)


def test_ar1_intervals_cover_the_truth_where_the_independent_ones_do_not() -> None:
    series = ds.ar1(np.random.default_rng(5), 300, 2000, 0.9)
    dep, iid = _coverage(series, [ds.ar1_truth(q) for q in QS])
    assert np.all(dep >= 0.93), dep
    assert np.all(iid < 0.6), iid  # the independent interval is far too narrow: the test can fail


def test_queue_bursts_are_covered() -> None:
    series = ds.bursts(np.random.default_rng(6), 300, 1000)
    dep, _ = _coverage(series, [ds.bursts_truth(q) for q in QS])
    assert np.all(dep >= 0.93), dep


def test_stalls_are_covered_where_independence_misses() -> None:
    # P95 sits in the gap between normal and stalled latencies: the run's own P95 cut may fall in
    # the normal tail, where its few stall episodes barely show, so the band of cuts decides.
    series = ds.stalls(np.random.default_rng(7), 300, 2000)
    dep, iid = _coverage(series, [ds.stalls_truth(q) for q in QS])
    assert np.all(dep >= 0.93), dep
    assert iid[1] < 0.5, iid


def test_the_design_effect_is_the_worst_over_the_cuts_the_truth_may_sit_at() -> None:
    # One stall episode just past the run's P95: at its own cut it barely shows, one cut further
    # it is the whole tail.
    rng = np.random.default_rng(12)
    x = 100 * rng.lognormal(0, 0.3, 1000)
    x[500:510] *= 4
    at_cut = design_effects(x, [95])[0]
    banded = design_effects(x, [95], band=True)[0]
    assert banded > 2 * at_cut
    cis, n_eff = ordered_percentile_cis(x, [95])
    assert n_eff[0] == 1000 / banded
    assert cis[0][1] >= np.sort(x)[990]  # reaches into the stall, as the plain interval does not
    assert percentile_cis(np.sort(x), [95])[0][1] < np.sort(x)[975]


def test_independent_requests_keep_the_plain_intervals() -> None:
    rng = np.random.default_rng(8)
    same = 0
    for x in 100 * rng.lognormal(0, 0.5, (200, 1000)):
        cis, n_eff = ordered_percentile_cis(x, QS)
        same += cis == percentile_cis(np.sort(x), QS) and n_eff == [1000.0, 1000.0]
    assert same >= 190  # tau within its own noise of 1 is taken as 1


def test_design_effect_grows_with_dependence_and_n_eff_decides_low_sample() -> None:
    rng = np.random.default_rng(9)
    weak, strong = ds.ar1(rng, 1, 2000, 0.5)[0], ds.ar1(rng, 1, 2000, 0.95)[0]
    assert design_effects(weak, [50])[0] < design_effects(strong, [50])[0]
    d = describe(strong, ordered=True)
    n_eff = d.n_eff["p95"]
    assert n_eff < 2000 / 10
    assert not enough_samples(n_eff, 95) and "p95" not in describe(strong).n_eff
    # in send order the interval is wider than the same values counted as independent
    lo, hi = d.ci95["p50"]
    plain = describe(strong).ci95["p50"]
    assert hi - lo > 2 * (plain[1] - plain[0])


def test_an_interval_at_a_tiny_effective_size_still_holds_its_percentile() -> None:
    # Four effective requests out of 1000: the effective sample's maximum is no quantile of its
    # own, so the upper bound is the whole sample's maximum, never under the percentile itself.
    for n, p, deff in ((1000, 0.95, 250.0), (1000, 0.99, 100.0), (200, 0.5, 60.0), (1000, 0.05, 250.0)):
        lo, hi = dependent_rank_bounds(n, p, 0.025, deff)
        point = p * (n - 1)
        assert lo <= point <= hi
    assert dependent_rank_bounds(1000, 0.95, 0.025, 250.0)[1] == 999
    assert dependent_rank_bounds(1000, 0.05, 0.025, 250.0)[0] == 0


def test_a_percentile_on_a_near_constant_level_sits_on_a_tie() -> None:
    x = np.sort(ds.near_constant(np.random.default_rng(13), 1, 1000)[0])
    assert near_constant(x, 50) and not near_constant(x, 95)  # the slow share is no tie
    stalls = np.sort(ds.stalls(np.random.default_rng(14), 1, 2000)[0])
    assert not near_constant(stalls, 50) and not near_constant(stalls, 95)


def test_a_band_cut_tied_with_the_percentile_is_no_other_level() -> None:
    # At the percentile the indicator is independent; every other cut moves in runs of 10. Over
    # spread latencies the band takes the waves; where all cuts tie with the percentile's value, a
    # cut between them orders jitter, not latency, and the band stays at the percentile's own tau.
    rng = np.random.default_rng(15)
    independent = (rng.random(1000) < 0.5).astype(np.float64)
    waves = np.repeat(rng.random(100) < 0.5, 10).astype(np.float64)

    def series_at(c: float) -> np.ndarray:
        return independent if c == 50.0 else waves

    spread = np.sort(100 * rng.lognormal(0, 0.3, 1000))
    tied = np.sort(100 * (1 + 0.002 * rng.random(1000)))
    assert band_correlation(series_at, 1000, 50.0, spread)[0] > 5
    assert band_correlation(series_at, 1000, 50.0, tied)[0] == 1.0


def test_a_short_strongly_dependent_run_leaves_the_p95_unbounded_above_and_covers_the_truth() -> None:
    # 200 requests of AR(1) rho 0.9 are worth about 10: no value of the run bounds P95 from above
    # (all of it may sit low), so the side is open and covers the truth; clamped at the run's
    # maximum it covered 87 %.
    series = ds.ar1(np.random.default_rng(21), 300, 200, 0.9)
    truth = ds.ar1_truth(95)
    covered = opened = 0
    for x in series:
        lo, hi = ordered_percentile_cis(x, [95.0])[0][0]
        covered += lo <= truth <= hi
        opened += hi == math.inf
    assert covered / len(series) >= 0.93, covered
    assert opened / len(series) >= 0.9  # open because the data cannot bound it, not by chance
    clamped = sum(x.max() >= truth for x in series) / len(series)
    assert clamped < 0.93  # the run's maximum is no upper bound: the test can fail


def test_a_side_is_open_only_where_dependence_leaves_no_rank_at_n_eff_to_bound_it() -> None:
    # 1,000 requests worth n_eff: open where the rank at n_eff lies beyond the sample
    assert open_sides(1000, 71, 0.95, 0.025) == (False, True)
    assert open_sides(1000, 72, 0.95, 0.025) == (False, False)
    assert open_sides(1000, 5, 0.5, 0.025) == (True, True)
    assert open_sides(1000, 6, 0.5, 0.025) == (False, False)
    assert open_sides(1000, 367, 0.99, 0.025)[1] and not open_sides(1000, 368, 0.99, 0.025)[1]
    # not the count alone: 64 requests bound no P95 even if independent, so the side stays clamped
    assert open_sides(64, 64, 0.95, 0.025) == (False, False)
    assert open_sides(64, 10, 0.95, 0.025) == (False, False)
    assert open_sides(71, 30, 0.95, 0.025) == (False, False) and open_sides(72, 30, 0.95, 0.025)[1]
    # nor a design effect under OPEN_MIN_DEFF (n_eff more than half of n)
    assert open_sides(100, 60, 0.95, 0.025) == (False, False) and open_sides(100, 50, 0.95, 0.025)[1]


def test_independent_requests_too_few_for_a_p95_keep_the_clamped_interval() -> None:
    # a 64-request sweep step of independent requests: the P95 interval is the order-statistic one,
    # clamped at the maximum, as it always was (low_sample flags it); no side opens
    rng = np.random.default_rng(24)
    for _ in range(20):
        x = 100 * rng.lognormal(0, 0.5, 64)
        (lo, hi), *_ = ordered_percentile_cis(x, [95.0])[0]
        assert math.isfinite(lo) and hi == x.max()
        assert "p95" in describe(x, ordered=True).low_sample


def test_a_bounded_interval_keeps_its_width() -> None:
    # independent requests and dependent ones with enough effective samples: the order-statistic
    # interval at n_eff, as before, with no side open
    rng = np.random.default_rng(22)
    for x in (100 * rng.lognormal(0, 0.5, 200), ds.ar1(rng, 1, 1000, 0.5)[0]):
        cis, n_eff = ordered_percentile_cis(x, QS)
        arr = np.sort(x)
        for (lo, hi), q, ne in zip(cis, QS, n_eff, strict=True):
            r_lo, r_hi = dependent_rank_bounds(len(x), q / 100, 0.025, len(x) / ne)
            assert (lo, hi) == (arr[r_lo], arr[r_hi])


def test_a_summary_with_an_unbounded_side_is_valid_json() -> None:
    x = ds.ar1(np.random.default_rng(23), 1, 200, 0.9)[0]
    d = describe(x, ordered=True)
    assert d.ci95["p95"][1] == math.inf
    text = json.dumps(d.to_dict(), allow_nan=False)  # raises on an Infinity or NaN token
    assert json.loads(text)["ci95"]["p95"][1] is None
    assert "Infinity" not in text and "NaN" not in text
