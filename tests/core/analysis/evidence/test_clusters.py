"""A few users or sessions (2 to 9) whose latencies differ: their design effect rests on the
clusters' degrees of freedom and Student's t, so the intervals cover a per-user truth; users that
do not differ keep about the plain width; one user changes nothing."""

from __future__ import annotations

import numpy as np

from tokenpace.core.analysis.evidence.bootstrap import resample_percentiles
from tokenpace.core.analysis.evidence.clusters import (
    cluster_design_effect,
    cluster_df,
    clusters_needed,
    t_widening,
)
from tokenpace.core.analysis.evidence.dependence import dependence
from tokenpace.core.analysis.evidence.samples import Samples
from tokenpace.testing import dependent_series as ds

SPREAD = 0.3  # log-sd of a user's own factor: as wide as the noise between one user's requests


def _keyed(x: np.ndarray, who: np.ndarray) -> Samples:
    return Samples([np.array([v]) for v in x], None, [f"user:{u}" for u in who])


def _sd(samples: Samples, rng: np.random.Generator) -> float:
    return float(resample_percentiles(samples, [50.0], 100, rng).std(ddof=1))


def test_few_users_that_differ_widen_the_median_interval_to_cover_the_truth() -> None:
    truth = ds.per_user_truth(50, SPREAD)
    for users in (3, 5, 8):
        rng = np.random.default_rng([48, users])
        series, who = ds.per_user(rng, 100, 300, users=users, spread=SPREAD)
        keyed = plain = 0
        for x, w in zip(series, who, strict=True):
            s, miss = _keyed(x, w), abs(float(np.median(x)) - truth)
            keyed += miss <= 1.96 * _sd(s, rng)
            plain += miss <= 1.96 * _sd(Samples(s.groups), rng)
        assert keyed >= 93, (users, keyed)
        assert plain < 60, (users, plain)  # requests one by one: far too narrow


def test_few_users_that_do_not_differ_keep_about_the_plain_width() -> None:
    for users in (3, 5, 8):
        rng = np.random.default_rng([49, users])
        series, who = ds.per_user(rng, 60, 300, users=users, spread=0.0)
        ratio = []
        for x, w in zip(series, who, strict=True):
            s = _keyed(x, w)
            ratio.append(_sd(s, rng) / _sd(Samples(s.groups), rng))
        # the same resampling in most runs; a chance spread between users (the F test's few per cent)
        assert np.median(ratio) < 1.1 and np.mean(np.array(ratio) < 1.5) >= 0.9, (users, sorted(ratio))


def test_the_design_effect_of_few_clusters_rests_on_their_degrees_of_freedom() -> None:
    rng = np.random.default_rng(50)
    x, who = ds.per_user(rng, 1, 600, users=4, spread=0.8)
    below = (x[0] <= np.median(x[0])).astype(float)
    assert cluster_df(who[0]) < 3 and cluster_design_effect(below, who[0]) > 50  # 4 users: widened
    assert cluster_design_effect(below, np.zeros(600)) == 1.0  # one user: nothing to compare
    # one user beside single requests: the single ones carry no between-user variance
    lone = np.where(np.arange(600) < 500, 0, np.arange(600))
    assert cluster_df(lone) < 1 and cluster_design_effect(below, lone) == 1.0
    assert cluster_design_effect(below, rng.integers(0, 4, 600)) == 1.0  # keys unrelated to values
    assert t_widening(1) > 40 and 4.5 < t_widening(2) < 5 and t_widening(30) < 1.2  # exact t at 1, 2


def test_the_plan_says_how_many_users_would_decide() -> None:
    rng = np.random.default_rng(51)
    x, who = ds.per_user(rng, 1, 1000, users=5, spread=SPREAD)
    plan = dependence(_keyed(x[0], who[0]), [50.0, 95.0])
    assert plan.by == "user" and plan.clusters == 5
    assert plan.clusters_needed is not None and np.all(plan.clusters_needed > 5)
    assert plan.clusters_needed[1] > plan.clusters_needed[0]  # a tail needs more
    assert clusters_needed(5, 4, 1.0, 1000, 50.0) is None  # no effect: users are not what limits it
