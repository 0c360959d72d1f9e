"""Paired-block A/B analysis on hand-made records: drift cancels, differences are found."""

from __future__ import annotations

import numpy as np
from baseline_fixtures import make_record

from tokenpace.core.analysis.evidence.verdict import Verdict
from tokenpace.core.analysis.rollout.abtest import analyse_blocks, min_p_value


def _block(rng, ttft_ms: float, n: int = 30):
    return [make_record(i, ttft_ms * rng.lognormal(0, 0.05), 10.0, 8) for i in range(n)]


def test_b_slower_is_found_despite_drift_larger_than_the_effect() -> None:
    rng = np.random.default_rng(1)
    drift = np.linspace(1.0, 1.5, 8)  # the machine slows 50% over the test; B is 10% slower
    blocks = [(_block(rng, 50 * d), _block(rng, 55 * d)) for d in drift]
    ab = analyse_blocks(blocks)
    ttft = ab.comparison.metric("ttft")
    p50 = ttft.row("p50")
    assert p50 is not None and p50.verdict is Verdict.SLOWER and p50.p_value is not None
    assert p50.p_value <= 2 / 2**8 + 1e-9  # every block agrees: the smallest p the design allows
    deltas = ab.block_deltas["ttft"]["p50"]
    assert len(deltas) == 8 and all(d is not None and d > 0 for d in deltas)
    assert ab.comparison.metric("tpot").verdict is not Verdict.SLOWER


def test_equal_arms_are_never_called_slower_or_faster() -> None:
    rng = np.random.default_rng(2)
    drift = np.linspace(1.0, 1.3, 10)
    blocks = [(_block(rng, 50 * d), _block(rng, 50 * d)) for d in drift]
    ab = analyse_blocks(blocks)
    for m in ab.comparison.metrics:
        assert m.verdict in (Verdict.UNDECIDED, Verdict.NEGLIGIBLE), m.metric
    p50 = ab.comparison.metric("ttft").row("p50")
    assert p50 is not None and p50.detectable is not None and p50.detectable > 0.05


def test_too_few_blocks_refuse_a_verdict() -> None:
    rng = np.random.default_rng(3)
    blocks = [(_block(rng, 50), _block(rng, 80)) for _ in range(4)]
    assert min_p_value(4) > 0.05
    ab = analyse_blocks(blocks)
    assert ab.comparison.metric("ttft").verdict is Verdict.TOO_FEW
    assert "4 blocks" in ab.comparison.method
