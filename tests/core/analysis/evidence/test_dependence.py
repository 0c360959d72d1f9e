"""The block resampler: independent requests keep the plain bootstrap; requests that move together
are drawn in blocks of send time, and the spread of a percentile matches its true sampling spread."""

from __future__ import annotations

import dataclasses

import numpy as np

from tokenpace.core.analysis.evidence.bootstrap import resample_percentiles
from tokenpace.core.analysis.evidence.dependence import block_draws, dependence
from tokenpace.core.analysis.evidence.samples import Samples
from tokenpace.testing import dependent_series as ds


def _flat(values: np.ndarray, sent: np.ndarray | None = None) -> Samples:
    return Samples([np.array([v]) for v in values], sent)


def test_independent_requests_are_resampled_one_by_one_as_before() -> None:
    x = 100 * np.random.default_rng(1).lognormal(0, 0.5, 1000)
    plan = dependence(_flat(x), [50, 95])
    assert plan.block == 1 and np.all(plan.widen == 1) and np.all(plan.n_eff == 1000)
    got = resample_percentiles(_flat(x), [50, 95], 50, np.random.default_rng(2))
    draws = np.random.default_rng(2).integers(0, 1000, size=(50, 1000))
    assert np.allclose(got, np.percentile(x[draws], [50, 95], axis=1).T)


def test_dependent_requests_are_drawn_in_blocks_with_the_true_spread() -> None:
    rng = np.random.default_rng(3)
    series = ds.ar1(rng, 300, 2000, 0.9)
    true_sd = np.std(np.percentile(series, 50, axis=1), ddof=1)
    ses, plain = [], []
    for x in series[:15]:
        plan = dependence(_flat(x), [50])
        assert plan.block > 5 and plan.n_eff[0] < 2000 / 5
        ses.append(resample_percentiles(_flat(x), [50], 300, rng, plan)[:, 0].std(ddof=1))
        plain.append(np.percentile(x[rng.integers(0, 2000, (300, 2000))], 50, axis=1).std(ddof=1))
    assert 0.85 < np.mean(ses) / true_sd < 1.6
    assert np.mean(plain) / true_sd < 0.5  # one by one, the spread is far too small


def test_send_time_orders_the_requests() -> None:
    x = ds.ar1(np.random.default_rng(4), 1, 2000, 0.9)[0]
    shuffle = np.random.default_rng(5).permutation(2000)
    in_order = dependence(_flat(x), [50])
    reordered = dependence(_flat(x[shuffle], sent=shuffle.astype(np.int64)), [50])
    assert reordered.block == in_order.block > 1
    assert dependence(_flat(x[shuffle]), [50]).block == 1  # out of time order: nothing moves together


def test_itl_gaps_travel_with_their_request_in_blocks() -> None:
    z = ds.ar1(np.random.default_rng(6), 1, 600, 0.9)[0]
    groups = [np.full(3, v) for v in z]
    plan = dependence(Samples(groups), [50])
    assert plan.block > 1 and plan.n_eff[0] < 600  # requests / tau
    boot = resample_percentiles(Samples(groups), [50], 100, np.random.default_rng(7), plan)
    assert boot.shape == (100, 1) and np.isfinite(boot).all()


def test_circular_blocks_are_runs_of_consecutive_requests() -> None:
    idx = block_draws(10, 4, 3, np.random.default_rng(8))
    assert idx.shape == (3, 10)
    for row in idx:
        for start in (0, 4):
            assert list(row[start : start + 4]) == [(row[start] + k) % 10 for k in range(4)]


def test_no_floor_where_the_percentile_sits_on_a_near_constant_level() -> None:
    # The median's indicator moves together over the whole run (its level drifts by 0.3 %): few
    # effective requests, whose order-statistic interval would reach the slow share's outliers.
    x = ds.near_constant(np.random.default_rng(16), 1, 100)[0]
    plan = dependence(_flat(x), [50, 95])
    assert plan.n_eff[0] < 5 and plan.floor_sd[0] == 0.0
    sd = resample_percentiles(_flat(x), [50], 300, np.random.default_rng(17), plan)[:, 0].std(ddof=1)
    assert sd < 0.005 * np.median(x)  # the level's own spread, not the outliers'


def test_a_tail_resting_on_stall_episodes_keeps_its_floor() -> None:
    x = ds.stalls(np.random.default_rng(18), 1, 2000)[0]
    plan = dependence(_flat(x), [95])
    assert plan.taus[0] > 1 and plan.floor_sd[0] > 0


def test_one_host_stall_far_past_a_tail_widens_it_to_at_most_its_own_level() -> None:
    # 400 requests near 26 ms, then a host stall of a few requests at 380 ms: the P95's spread is
    # wide, but an SD beyond the level itself would only say "anything from zero up"
    rng = np.random.default_rng(19)
    x = 26 * rng.lognormal(0, 0.05, 400)
    x[200:206] = 380.0
    x[100:130] *= 1.2
    plan = dependence(_flat(x), [95])
    assert plan.floor_sd[0] > np.percentile(x, 95)  # the rank interval at n_eff reaches the stall
    boot = resample_percentiles(_flat(x), [95], 500, np.random.default_rng(20), plan)[:, 0]
    bare = dataclasses.replace(plan, widen=np.ones(1), floor_sd=np.zeros(1))
    blocks = resample_percentiles(_flat(x), [95], 500, np.random.default_rng(20), bare)[:, 0]
    assert boot.std(ddof=1) <= max(np.percentile(x, 95), blocks.std(ddof=1)) * 1.001
