from itertools import islice

import numpy as np
import pytest

from tokenpace.core.schedule.arrivals import arrival_offsets_s


def offsets(rate, arrival, n=20000, burstiness=1.0, seed=0):
    gen = arrival_offsets_s(rate, arrival, np.random.default_rng(seed), burstiness)
    return np.fromiter(islice(gen, n), float)


def test_constant_is_evenly_spaced():
    o = offsets(4, "constant", 5)
    assert list(o) == [0, 0.25, 0.5, 0.75, 1.0]


@pytest.mark.parametrize(
    ("arrival", "burstiness", "cv"), [("poisson", 1.0, 1.0), ("gamma", 0.25, 2.0), ("gamma", 4.0, 0.5)]
)
def test_mean_rate_holds_and_burstiness_sets_the_spread(arrival, burstiness, cv):
    gaps = np.diff(offsets(10, arrival, burstiness=burstiness))
    assert gaps.mean() == pytest.approx(0.1, rel=0.05)
    # coefficient of variation of gamma gaps = 1 / sqrt(shape)
    assert gaps.std() / gaps.mean() == pytest.approx(cv, rel=0.08)


def test_seeded_and_reproducible():
    assert (offsets(5, "poisson", 50, seed=3) == offsets(5, "poisson", 50, seed=3)).all()


@pytest.mark.parametrize(("rate", "arrival", "b"), [(0, "poisson", 1), (1, "weibull", 1), (1, "gamma", 0)])
def test_bad_parameters_refused(rate, arrival, b):
    with pytest.raises(ValueError):
        next(arrival_offsets_s(rate, arrival, np.random.default_rng(0), b))
