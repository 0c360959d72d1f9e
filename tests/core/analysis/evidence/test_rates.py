import math

import pytest

from tokenpace.core.analysis.evidence.rates import exact_lower, wilson


@pytest.mark.parametrize("n", [1, 3, 8, 48, 1000])
def test_the_exact_lower_bound_has_closed_forms_at_one_and_at_all(n: int) -> None:
    # one of n: 1 - (1 - a/2)^(1/n); n of n: (a/2)^(1/n)
    assert exact_lower(1, n) == pytest.approx(1 - 0.975 ** (1 / n), rel=1e-9)
    assert exact_lower(n, n) == pytest.approx(0.025 ** (1 / n), rel=1e-9)


def test_one_event_of_a_short_step_does_not_lift_the_exact_bound_past_one_percent() -> None:
    assert wilson(1, 8)[0] > 0.01  # type: ignore[index]  # what Wilson's score bound said
    assert all(exact_lower(1, n) < 0.01 for n in range(3, 200))
    assert exact_lower(2, 8) > 0.01  # two of eight do


@pytest.mark.parametrize(("k", "n"), [(2, 8), (4, 48), (200, 10_000), (3_000, 100_000)])
def test_the_exact_bound_is_never_above_wilsons_and_holds_its_tail(k: int, n: int) -> None:
    lower = exact_lower(k, n)
    assert 0 < lower <= wilson(k, n)[0] + 1e-12  # type: ignore[index]
    # at the bound, k or more of n happens with probability a/2 (Normal check for large n)
    if n >= 10_000:
        sd = math.sqrt(n * lower * (1 - lower))
        assert (k - n * lower) / sd == pytest.approx(1.96, abs=0.1)


def test_no_events_or_no_trials_bound_nothing() -> None:
    assert exact_lower(0, 100) == 0.0
    assert exact_lower(0, 0) == 0.0
