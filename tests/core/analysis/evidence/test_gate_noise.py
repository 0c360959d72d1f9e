"""The noise a gate uses: the upper confidence bound of what the library learned (it covers the true
noise 95 times in 100), never below what the current runs show, learned only under the current
runs' host conditions; and which side of an undecided look limits the decision."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tokenpace.core.analysis.evidence.gate_noise import (
    BUSY,
    QUIET,
    current_host,
    gate_noise,
    host_class,
    summary_host,
    with_host,
)
from tokenpace.core.analysis.evidence.runnoise import (
    GroupNoise,
    chi2_quantile,
    pool,
    upper_bound,
)
from tokenpace.core.analysis.evidence.sequential import look, side_needs

KEY = "ttft.p50"


@pytest.mark.parametrize(
    ("p", "df", "table"),
    [(0.05, 1, 0.00393), (0.05, 2, 0.1026), (0.05, 9, 3.325), (0.95, 10, 18.307), (0.5, 30, 29.336)],
)
def test_chi_square_quantiles_match_the_table(p: float, df: float, table: float) -> None:
    assert chi2_quantile(p, df) == pytest.approx(table, rel=2e-3)


def test_the_upper_bound_covers_the_true_noise_95_times_in_100() -> None:
    """Groups of 4 runs of a host whose runs move 9 % (log SD): the bound of their estimate (shrunk
    toward the 2.5 % prior) is at or above 9 % in at least 95 % of draws; the estimate itself is not."""
    rng = np.random.default_rng(3)
    truth, covered, point_covered, trials = 0.09, 0, 0, 2000
    for _ in range(trials):
        x = np.exp(rng.normal(0, truth, (2, 4)))  # two groups of four runs
        groups = [GroupNoise(KEY, 4, float(np.var(np.log(g), ddof=1)), 0.0, 1.0) for g in x]
        noise = pool(KEY, groups)
        covered += upper_bound(noise).rel_sd >= truth
        point_covered += noise.rel_sd >= truth
    assert covered >= 0.95 * trials
    assert point_covered < 0.6 * trials  # the estimate alone promises a quieter host half the time


def test_an_assumed_noise_is_not_bounded_and_a_bound_says_what_it_bounds() -> None:
    assert upper_bound(pool(KEY, [])).rel_sd == pytest.approx(0.05)
    learned = pool(KEY, [GroupNoise(KEY, 10, 0.029**2, 0.0, 1.0)])
    bounded = upper_bound(learned)
    assert bounded.rel_sd == pytest.approx(0.029 * math.sqrt(9 / chi2_quantile(0.05, 9)))
    assert bounded.point_sd == pytest.approx(0.029) and "95% upper bound of the 2.9%" in bounded.describe()


def test_never_below_what_the_current_runs_show_and_it_says_so() -> None:
    quiet = [GroupNoise(KEY, 10, 0.029**2, 0.0, 1.0)]  # a quiet library: 2.9 %
    current = [GroupNoise(KEY, 3, 0.09**2, 0.0, 1.0), GroupNoise(KEY, 3, 0.09**2, 0.0, 1.0)]
    noise = gate_noise(KEY, quiet, current, None, pool_current=False)
    assert noise.rel_sd == pytest.approx(0.09) and noise.current_sd == pytest.approx(0.09)
    assert "below what the current runs show (9.0%): using 9.0%" in noise.describe()
    pooled = gate_noise(KEY, quiet, current, None)  # pooled with the library, still never below
    assert pooled.rel_sd >= 0.09
    calm = gate_noise(KEY, quiet, [GroupNoise(KEY, 3, 0.01**2, 0.0, 1.0)], None)
    assert calm.rel_sd > 0.029 and "current runs show" not in calm.describe()  # the bound, above both


def test_runs_of_other_host_conditions_teach_nothing_about_these() -> None:
    quiet = with_host([GroupNoise(KEY, 10, 0.029**2, 0.0, 1.0)], QUIET)
    busy = gate_noise(KEY, quiet, [], BUSY)
    assert busy.assumed and busy.rests_on_assumption and busy.elsewhere_sd == pytest.approx(0.029)
    assert "other host conditions (2.9%) not counted: these runs were measured on a busy host" in (
        busy.describe()
    )
    same = gate_noise(KEY, quiet, [], QUIET)
    assert not same.assumed and same.elsewhere_sd is None and same.runs == 10
    assert not gate_noise(KEY, quiet, [], None).assumed  # host not recorded: no filter


def test_host_class_from_load_and_stalls() -> None:
    assert host_class(None, None) is None
    assert host_class(0.2, 0.0) == QUIET and host_class(0.9, 0.0) == BUSY and host_class(0.1, 0.02) == BUSY
    assert current_host([QUIET, BUSY]) == BUSY and current_host([QUIET, QUIET]) == QUIET
    assert current_host([QUIET, None]) is None and current_host([]) is None
    assert summary_host({"client": {"host": {"load_per_core": 1.5}, "stalls": {"share": 0.0}}}) == BUSY
    assert summary_host({"client": {"stalls": {"share": 0.0}}}) is None  # recorded before hosts were


def test_which_side_limits_an_undecided_look() -> None:
    var = 0.05**2 + 0.01**2  # one run: an assumed 5 % between runs plus 1 % sampling
    one = look([100.0], [120.0], var, var, 0.05)
    needs = side_needs(one, var, var, 0.05, candidate_budget=6)
    assert one.outcome == "undecided" and needs.candidate is None and needs.limiting == "baseline"
    assert needs.baseline == 2  # three baseline runs against six candidate runs decide +20 %
    assert side_needs(one, var, var, 0.05).limiting == "both"  # one candidate run: neither alone
    three = look([100.0, 101.0, 99.0], [120.0], var, var, 0.05)
    more = side_needs(three, var, var, 0.05)
    assert three.outcome == "undecided" and more.candidate is not None and more.limiting is None
    done = look([100.0] * 4, [150.0] * 4, var, var, 0.05)
    assert done.outcome == "regressed" and side_needs(done, var, var, 0.05).candidate == 0
