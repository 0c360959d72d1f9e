"""The always-valid interval of repeats-until-decided, by simulation: a look after every run and a
stop at the first decision keep the false alarms under alpha; a +20 % change is decided in a few
runs a side; a +8 % one is never passed."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tokenpace.core.analysis.evidence.sequential import (
    PASS,
    REGRESSED,
    UNDECIDED,
    look,
    mixture_half_width,
)

TAU = 0.03 / math.sqrt(3)  # speed uniform within +-3 % per run: SD 1.7 %
SE = 0.01  # sampling noise of one run's percentile
VAR = TAU**2 + SE**2


def _run(rng: np.random.Generator, level: float) -> float:
    return level * rng.uniform(0.97, 1.03) * math.exp(rng.normal(0, SE))


def _sequence(rng: np.random.Generator, truth: float, max_runs: int, var: float = VAR) -> tuple[str, int]:
    """Runs added one at a time to the side the rule names, a look after each, until decided."""
    a, b = [_run(rng, 100.0)], [_run(rng, 100.0 * truth)]
    while True:
        seen = look(a, b, var, var, 0.05)
        if seen.outcome != UNDECIDED or max(len(a), len(b)) >= max_runs:
            return seen.outcome, max(len(a), len(b))
        (a if seen.next_side == "a" else b).append(
            _run(rng, 100.0 * (1.0 if seen.next_side == "a" else truth))
        )


def test_the_mixture_interval_is_wider_than_a_fixed_one_and_shrinks_with_information() -> None:
    assert mixture_half_width(100, 100, 0.05) > 1.96 / math.sqrt(100)  # the price of looking often
    assert mixture_half_width(1000, 100, 0.05) < mixture_half_width(100, 100, 0.05)
    assert math.isinf(mixture_half_width(0, 100, 0.05))


@pytest.mark.parametrize("truth", [1.0, 1.05])
def test_looking_after_every_run_keeps_false_alarms_under_alpha(truth: float) -> None:
    # at the threshold itself (+5 %) a REGRESSED is a false alarm too: the worst case
    rng = np.random.default_rng(11 if truth == 1.0 else 12)
    trials = 1000
    outcomes = [_sequence(rng, truth, max_runs=20)[0] for _ in range(trials)]
    assert outcomes.count(REGRESSED) <= 0.05 * trials
    if truth == 1.0:
        assert outcomes.count(PASS) >= 0.95 * trials  # and an unchanged server is passed


def test_a_20_percent_regression_is_decided_in_a_few_runs_and_8_percent_is_never_passed() -> None:
    rng = np.random.default_rng(13)
    big = [_sequence(rng, 1.20, max_runs=10) for _ in range(400)]
    assert sum(o == REGRESSED for o, _ in big) >= 0.95 * len(big)
    assert float(np.median([k for _, k in big])) <= 3
    small = [_sequence(rng, 1.08, max_runs=10)[0] for _ in range(400)]
    assert small.count(PASS) == 0


def test_only_the_side_that_can_run_is_asked_for_and_bad_input_is_refused() -> None:
    seen = look([100.0], [103.0, 104.0, 102.0], VAR, VAR, 0.05, rerun="b")
    assert seen.outcome == UNDECIDED and seen.next_side == "b"
    assert look([100.0], [103.0, 104.0, 102.0], VAR, VAR, 0.05).next_side == "a"  # the fewer runs
    with pytest.raises(ValueError):
        look([], [1.0], VAR, VAR, 0.05)
