"""Stored figures: a run's percentiles with their bootstrap SEs, kept when it is saved, give the
same verdicts as the bootstrap over the records (regressed, equal, undecided), with nearly the same
intervals; the library's noise learned from them is what its records teach."""

from __future__ import annotations

import numpy as np
import pytest
from baseline_fixtures import make_record

from tokenpace.core.analysis.comparison.compare import compare_runs_records
from tokenpace.core.analysis.comparison.stored_levels import (
    STORED_METHOD,
    STORED_PERCENTILES,
    compare_levels,
    levels_noise,
    run_levels,
)
from tokenpace.core.analysis.evidence.repeats import repeat_noise
from tokenpace.core.record import RequestRecord


def _runs(ttft: float, count: int, seed: int, n: int = 300) -> list[list[RequestRecord]]:
    rng = np.random.default_rng(seed)
    return [
        [
            make_record(i, ttft * rng.lognormal(0, 0.05) * (1 + 0.01 * k), 10 * rng.lognormal(0, 0.02))
            for i in range(n)
        ]
        for k in range(count)
    ]


def _by_key(records: list[RequestRecord]) -> dict:
    return {v.key: v for v in run_levels(records)}


CASES = {  # (A's TTFT, B's, runs a side, library reruns): the verdict both methods reach
    "regressed": ((100.0, 130.0, 3, 6), "slower"),
    "equal": ((100.0, 100.0, 3, 6), "negligible"),
    "undecided": ((100.0, 106.0, 1, 0), "undecided"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_stored_figures_decide_as_the_bootstrap_over_records(case: str) -> None:
    (ttft_a, ttft_b, runs, reruns), verdict = CASES[case]
    a, b, library = _runs(ttft_a, runs, 1), _runs(ttft_b, runs, 2), _runs(ttft_a, reruns, 3)
    exact = compare_runs_records(a, b, learned=repeat_noise(library) if reruns else ())
    learned = levels_noise([_by_key(r) for r in library]) if reruns else []
    stored = compare_levels([_by_key(r) for r in a], [_by_key(r) for r in b], learned=learned)
    assert stored.method == STORED_METHOD and "stored figures" in stored.method
    for m_stored, m_exact in zip(stored.metrics, exact.metrics, strict=True):
        assert m_stored.verdict == m_exact.verdict, m_stored.metric
        assert m_stored.rank_p is None and m_stored.n_a == m_exact.n_a
        for r_s, r_e in zip(m_stored.rows, m_exact.rows, strict=True):
            assert r_s.a == pytest.approx(r_e.a) and r_s.b == pytest.approx(r_e.b)
            assert r_s.rel_ci is not None and r_e.rel_ci is not None
            assert r_s.rel_ci[0] == pytest.approx(r_e.rel_ci[0], abs=0.01)
            assert r_s.rel_ci[1] == pytest.approx(r_e.rel_ci[1], abs=0.01)
    assert stored.metric("ttft").verdict.value == verdict


def test_library_noise_from_stored_figures_is_what_the_records_teach() -> None:
    library = _runs(100.0, 5, 4)
    from_records = {g.key: g for g in repeat_noise(library)}
    stored = {g.key: g for g in levels_noise([_by_key(r) for r in library])}
    assert stored.keys() == from_records.keys() and "ttft.p50" in stored
    for key, g in stored.items():
        assert g.runs == 5 and g.level == pytest.approx(from_records[key].level)
        assert np.sqrt(g.rel_var) == pytest.approx(np.sqrt(from_records[key].rel_var), abs=0.01)


def test_a_run_keeps_every_metric_it_has_samples_of() -> None:
    levels = run_levels(_runs(100.0, 1, 5, n=40)[0])
    keys = {v.key for v in levels}
    assert {f"ttft.p{q:g}" for q in STORED_PERCENTILES} <= keys
    assert all(v.n > 0 and 0 < v.n_eff <= v.n and v.value > 0 for v in levels)
    with pytest.raises(ValueError, match="not stored"):
        compare_levels([{}], [{}], percentiles=(75.0,))
