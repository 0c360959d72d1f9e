"""E-divisive change points: a planted shift is found, pure noise stays quiet at the stated rate."""

from __future__ import annotations

import numpy as np
import pytest

from tokenpace.core.analysis.comparison.history import analyse_history, check_metric, summary_value
from tokenpace.core.analysis.evidence.changepoint import e_divisive

NOISE = 0.03  # run-to-run noise of a P95: 3% (coefficient of variation)


def _history(seed: int, n: int = 60, shift_at: int | None = None, shift: float = 0.08) -> np.ndarray:
    x = 100 * (1 + NOISE * np.random.default_rng(seed).standard_normal(n))
    if shift_at is not None:
        x[shift_at:] *= 1 + shift
    return x


@pytest.mark.parametrize("seed", range(8))
def test_planted_8_percent_shift_is_found_where_and_how_big(seed: int) -> None:
    points = e_divisive(_history(seed, shift_at=35), seed=seed)
    assert len(points) >= 1
    best = min(points, key=lambda p: p.p_value)
    assert abs(best.index - 35) <= 3
    assert best.rel_change == pytest.approx(0.08, abs=0.03)
    assert best.p_value <= 0.05


def test_pure_noise_false_alarm_rate_is_at_most_alpha() -> None:
    # 60 noise-only histories at alpha = 0.05: expect ~3 false alarms. Binomial(60, 0.05) exceeds 7
    # with probability < 0.01, so more than 7 would mean the test is not holding its rate.
    alarms = sum(bool(e_divisive(_history(1000 + s), alpha=0.05, seed=s)) for s in range(60))
    assert alarms <= 7


def test_two_shifts_and_short_series() -> None:
    x = _history(5, n=90)
    x[30:] *= 1.10
    x[60:] *= 0.85
    idx = sorted(p.index for p in e_divisive(x, seed=1))
    assert len(idx) == 2 and abs(idx[0] - 30) <= 3 and abs(idx[1] - 60) <= 3
    assert e_divisive([1.0, 2.0, 3.0]) == []  # too short to split
    with pytest.raises(ValueError):
        e_divisive([1.0, float("nan")] * 10)


def test_history_reads_stored_summaries() -> None:
    assert check_metric("TTFT.p95") == "ttft.p95"
    assert check_metric("e2e.p99") == "e2e.p99"  # a metric name with a digit in it
    with pytest.raises(ValueError, match="unknown metric"):
        check_metric("ttft.p97")
    summary = {"ttft_ms": {"p95": 12.5}, "output_token_throughput": 900.0}
    assert summary_value(summary, "ttft.p95") == 12.5
    assert summary_value(summary, "throughput") == 900.0
    assert summary_value(summary, "e2e.p99") is None
    series = _history(3, shift_at=30)
    runs = [
        (f"r{i}", f"2024-01-{i % 28 + 1:02d}", {"ttft_ms": {"p95": float(v)}}) for i, v in enumerate(series)
    ]
    runs.insert(5, ("empty", "2024-01-05", {}))
    hist = analyse_history(runs, "ttft.p95")
    assert hist.skipped == ["empty"] and len(hist.points) == 60
    assert [abs(cp.index - 30) <= 3 for cp in hist.change_points] == [True]
    data = hist.to_dict()
    assert data["change_points"][0]["run_id"] == hist.points[hist.change_points[0].index].run_id
    assert "false alarm" in data["method"]


def test_a_small_level_change_on_the_same_server_is_minor_not_a_shift() -> None:
    # A quiet series (1 % noise) whose level moves +2.9 %: real for E-divisive, below the practical 5 %.
    rng = np.random.default_rng(21)
    series = 100 * (1 + 0.01 * rng.standard_normal(40))
    series[20:] *= 1.029
    runs = [
        (f"r{i}", f"2024-02-{i % 28 + 1:02d}", {"tpot_ms": {"p50": float(v)}}) for i, v in enumerate(series)
    ]
    hist = analyse_history(runs, "tpot.p50")
    assert hist.change_points == [] and len(hist.minor) == 1
    size = hist.sizes[hist.minor[0].index]
    assert size.lo < 0.05 and 0.02 < size.rel < 0.04
    assert hist.to_dict()["minor_changes"][0]["rel_ci_high"] == size.hi
    assert hist.detectable is not None and 0.05 < hist.detectable < 0.07  # 1 % noise, 40 runs
    big = series.copy()
    big[20:] *= 1.08  # +11 % in all: beyond 5 % with confidence, a shift
    runs = [(f"r{i}", "2024-02-01", {"tpot_ms": {"p50": float(v)}}) for i, v in enumerate(big)]
    assert [cp.index for cp in analyse_history(runs, "tpot.p50").change_points] == [20]
