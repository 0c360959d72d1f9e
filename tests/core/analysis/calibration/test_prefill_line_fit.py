"""prefill_line_fit: TTFT against the prompt length, a line with a memory-bound floor at the short end,
or a constant where the ladder shows no prefill cost; refused without a request alone in flight."""

from __future__ import annotations

import pytest

from tokenpace.core.analysis.calibration.engine_obs import PrefillObs
from tokenpace.core.analysis.calibration.prefill_line_fit import fit_prefill


def _ladder(ttft_ms: dict[int, float], each: int = 5) -> list[PrefillObs]:
    return [PrefillObs(float(n), t / 1e3) for n, t in ttft_ms.items() for _ in range(each)]


def test_a_line_over_the_ladder_gives_the_per_token_cost() -> None:
    fit = fit_prefill(_ladder({n: 10 + 0.02 * n for n in (128, 256, 512, 1024, 2048)}))
    assert fit.per_token == pytest.approx(0.02e-3, rel=0.01)
    assert fit.intercept == pytest.approx(0.010, rel=0.01)
    assert fit.plateau is None and fit.notes["prefill_per_token"].identified


def test_short_prompts_all_as_slow_are_the_memory_bound_floor() -> None:
    """16-128 tokens all take 30 ms (the weights' read), the line 10 ms + 0.02 ms a token past it."""
    ttft = {16: 30.0, 64: 30.0, 128: 30.0} | {n: 10 + 0.02 * n for n in (1024, 2048, 4096)}
    fit = fit_prefill(_ladder(ttft))
    assert fit.plateau == pytest.approx(0.020, rel=0.02)  # the floor's level over the line's intercept
    assert fit.per_token == pytest.approx(0.02e-3, rel=0.02)


def test_no_growth_with_the_prompt_is_a_constant_and_says_why() -> None:
    fit = fit_prefill(_ladder({128: 50.0, 512: 49.0, 2048: 48.5}))
    assert fit.per_token == 0.0 and not fit.notes["prefill_per_token"].identified
    assert "did not grow with the prompt" in fit.notes["prefill_per_token"].how


def test_one_length_only_is_a_constant_and_names_the_ladder_it_needs() -> None:
    fit = fit_prefill(_ladder({256: 40.0}))
    assert fit.per_token == 0.0 and "input-length ladder" in fit.notes["prefill_per_token"].how


def test_nothing_alone_in_flight_is_refused() -> None:
    with pytest.raises(ValueError, match="no request was alone in flight"):
        fit_prefill([])
