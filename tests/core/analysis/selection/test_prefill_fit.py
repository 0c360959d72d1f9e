"""The TTFT-on-input-tokens fit recovers a known line, and moves a candidate by it."""

from __future__ import annotations

import numpy as np
import pytest

from tokenpace.core.analysis.selection.prefill_fit import fit_ttft, move_to_input_len
from tokenpace.core.analysis.selection.select import Placement


def test_the_fit_recovers_a_known_prefill_rate_and_fixed_part_within_its_interval():
    rng = np.random.default_rng(0)
    tokens = np.repeat([512, 1024, 2048, 4096], 50).astype(float)
    ttft = 12.0 + 0.035 * tokens + rng.normal(0, 2.0, tokens.size)  # 35 ms per 1k, 12 ms fixed
    fit = fit_ttft(tokens, ttft)
    assert fit.ms_per_1k_ci[0] < 35.0 < fit.ms_per_1k_ci[1]
    assert fit.fixed_ms_ci[0] < 12.0 < fit.fixed_ms_ci[1]
    assert fit.ms_per_1k_ci[1] - fit.ms_per_1k_ci[0] < 2.0  # 200 requests pin it down
    assert fit.r2 > 0.99 and fit.n == 200


def test_an_exact_line_has_a_zero_width_interval_and_one_length_is_refused():
    fit = fit_ttft([1000, 2000, 3000], [40.0, 70.0, 100.0])
    assert fit.ms_per_1k == pytest.approx(30.0) and fit.fixed_ms == pytest.approx(10.0)
    assert fit.ms_per_1k_ci == pytest.approx((30.0, 30.0))
    with pytest.raises(ValueError, match="more than one input length"):
        fit_ttft([512, 512, 512], [1.0, 2.0, 3.0])


def test_moving_to_a_longer_input_adds_the_slope_and_the_bound_its_upper_end():
    fit = fit_ttft([1000, 1000, 2000, 2000], [38.0, 42.0, 68.0, 72.0])  # 30 ms per 1k, noisy
    at = Placement(True, "run", {"ttft_ms.p95": 100.0, "ttft_ms.p95.hi": 110.0, "prompt_tokens": 1000.0})
    moved = move_to_input_len(at, fit, 3000, "sweep s")
    assert moved.values["ttft_ms.p95"] == pytest.approx(100.0 + 2 * 30.0)
    assert moved.values["ttft_ms.p95.hi"] == pytest.approx(110.0 + 2 * fit.ms_per_1k_ci[1])
    assert moved.values["prompt_tokens"] == 3000.0 and "sweep s" in moved.where
    shorter = move_to_input_len(at, fit, 500, "sweep s")
    assert shorter.values["ttft_ms.p95.hi"] == pytest.approx(110.0 - 0.5 * fit.ms_per_1k_ci[0])
