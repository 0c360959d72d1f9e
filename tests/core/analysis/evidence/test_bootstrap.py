"""The bootstrap's percentiles of each resample: from ranks, equal to numpy's own to the last bit."""

from __future__ import annotations

import numpy as np
import pytest

from tokenpace.core.analysis.evidence.bootstrap import drawn_percentiles, resample_percentiles
from tokenpace.core.analysis.evidence.dependence import block_draws, dependence
from tokenpace.core.analysis.evidence.samples import Samples

QS = np.array([0.0, 1.0, 12.5, 50.0, 90.0, 95.0, 99.0, 99.9, 100.0, 37.3])


@pytest.mark.parametrize("n", [1, 2, 3, 17, 200, 1001])
@pytest.mark.parametrize("decimals", [0, 2, 12])  # 0: many ties
def test_drawn_percentiles_equal_numpys(n: int, decimals: int) -> None:
    rng = np.random.default_rng(n * 100 + decimals)
    values = np.round(rng.lognormal(3, 1, n), decimals)
    order = np.argsort(values, kind="stable")
    ranks = np.empty(n, dtype=np.int64)
    ranks[order] = np.arange(n)
    draws = rng.integers(0, n, size=(64, n))
    got = drawn_percentiles(values[order], ranks[draws], QS)
    assert np.array_equal(got, np.percentile(values[draws], QS, axis=1).T)


def test_independent_sample_resamples_as_numpy_did() -> None:
    """Blocks of one request, no widening: the same random draws give the same percentiles."""
    rng = np.random.default_rng(7)
    s = Samples([np.array([v]) for v in rng.lognormal(4, 0.3, 500)])
    qs = [50.0, 95.0, 99.0]
    plan = dependence(s, qs)
    assert plan.block == 1 and not np.any(plan.widen > 1) and not np.any(plan.floor_sd > 0)
    got = resample_percentiles(s, qs, 300, np.random.default_rng(3), plan)
    values = np.concatenate(plan.groups)
    draws = block_draws(len(plan.groups), 1, 300, np.random.default_rng(3))
    assert np.array_equal(got, np.percentile(values[draws], qs, axis=1).T)


def test_dependent_sample_drawn_in_blocks_as_numpy_did() -> None:
    """Requests that move together (a slow wave): blocks longer than one, the same draws."""
    rng = np.random.default_rng(8)
    wave = np.repeat(rng.lognormal(0, 0.5, 40), 25)
    s = Samples([np.array([v]) for v in 100 * wave * rng.lognormal(0, 0.1, 1000)])
    qs = [50.0, 95.0]
    plan = dependence(s, qs)
    assert plan.block > 1
    stripped = type(plan)(
        plan.groups, plan.taus, np.ones(len(qs)), plan.block, plan.n_eff, np.zeros(len(qs)), plan.by
    )  # no widening or floor: the draws themselves compared
    got = resample_percentiles(s, qs, 200, np.random.default_rng(5), stripped)
    values = np.concatenate(plan.groups)
    draws = block_draws(len(plan.groups), plan.block, 200, np.random.default_rng(5))
    assert np.array_equal(got, np.percentile(values[draws], qs, axis=1).T)
