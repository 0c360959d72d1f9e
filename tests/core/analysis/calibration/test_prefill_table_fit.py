"""prefill_table_fit: the ladder tabulated where the line misfits, as prefill *compute* (the simulator
sums it over the prompts that share a step and takes the larger of it and the weights' read)."""

from __future__ import annotations

import pytest

from tokenpace.core.analysis.calibration.engine_costs import StepCosts
from tokenpace.core.analysis.calibration.prefill_table_fit import prefill_table

# 5 ms fixed a step, 8 ms to read the weights, 6 us a prompt token: a prefill alone is memory-bound
# up to ~1,300 tokens
COSTS = StepCosts(fixed=0.005, per_seq=0.0, weights=0.008, per_context=0.0, per_token=6e-6, per_pair=0.0)


def test_a_memory_bound_length_is_priced_by_the_lines_compute_not_the_weights_read() -> None:
    """TTFT alone at 28 and 268 tokens was at most one weights' read (12.5-12.8 ms less 5 fixed):
    summed per prompt, 32 such prompts sharing a step would cost 32 reads (256 ms) where the engine
    needs ~52 ms of compute. There the line's compute stands in; the compute-bound lengths keep what
    was measured."""
    groups = [(28.0, 0.0125, 5.0), (268.0, 0.0128, 20.0), (1036.0, 0.0240, 8.0), (4108.0, 0.0450, 9.0)]
    n, ms, note = prefill_table(groups, COSTS, residual=0.2, sigma=0.0, ttft_by_length={})
    assert n == (28.0, 268.0, 1036.0, 4108.0) and note.identified
    assert ms[0] == pytest.approx(28 * 6e-3) and ms[1] == pytest.approx(268 * 6e-3)
    assert ms[2] == pytest.approx(19.0) and ms[3] == pytest.approx(40.0)


def test_the_step_noise_widens_what_counts_as_memory_bound() -> None:
    """At a step CV of 0.2 a prefill within exp(0.4) of the weights' read (11.9 ms here) is not told
    from one; 12.5 ms over the fixed parts is."""
    groups = [(28.0, 0.0165, 5.0), (268.0, 0.0175, 5.0), (4108.0, 0.0450, 9.0)]
    _, ms, _ = prefill_table(groups, COSTS, residual=0.2, sigma=0.2, ttft_by_length={})
    assert ms[0] == pytest.approx(28 * 6e-3)
    assert ms[1] == pytest.approx(12.5 * 1.0202, rel=1e-3)  # x exp(sigma^2 / 2): a step's mean
