"""Knee detection on curves whose knee is known in advance."""

from __future__ import annotations

import math

import pytest

from tokenpace.core.analysis.capacity.knee import find_knee


def test_flat_then_linear_knee_is_the_break():
    xs = [float(x) for x in range(1, 21)]
    ys = [100.0 if x <= 10 else 100.0 + 50.0 * (x - 10) for x in xs]
    res = find_knee(xs, ys, "TTFT P95")
    assert res.knee is not None
    assert res.knee.index == 9
    assert res.knee.load == 10.0
    assert res.knee.latency == 100.0
    assert res.knee.metric == "TTFT P95"


def test_mm1_curve_knee_where_slope_equals_the_chord():
    # W = 1/(mu - x): Kneedle's continuous knee is where W'(x) = dW/dx over the range,
    # i.e. x* = mu - sqrt(dx/dW) = 10 - sqrt(8.5/1.8889) = 7.879; on a 0.5 grid that is 8.0
    mu = 10.0
    xs = [1.0 + 0.5 * i for i in range(18)]  # 1 .. 9.5
    ys = [1000.0 / (mu - x) for x in xs]
    x_star = mu - math.sqrt((xs[-1] - xs[0]) / (1 / (mu - xs[-1]) - 1 / (mu - xs[0])))
    assert x_star == pytest.approx(7.879, abs=1e-3)
    res = find_knee(xs, ys)
    assert res.knee is not None
    assert res.knee.load == 8.0


def test_closed_loop_plateau_knee_is_the_last_cheap_step():
    # throughput stops growing at 10 req/s while latency climbs: the knee is where it reached 10
    xs = [1.0, 2.0, 4.0, 8.0, 10.0, 10.1, 10.0]
    ys = [100.0, 100.0, 102.0, 105.0, 130.0, 260.0, 520.0]
    res = find_knee(xs, ys)
    assert res.knee is not None and res.knee.index == 4


def test_knee_does_not_depend_on_units():
    xs = [float(x) for x in range(1, 21)]
    ys = [100.0 if x <= 13 else 100.0 + 30.0 * (x - 13) for x in xs]
    a = find_knee(xs, ys).knee
    b = find_knee([x * 60 for x in xs], [y / 1000 for y in ys]).knee
    assert a is not None and b is not None and a.index == b.index == 12


def test_no_knee_when_latency_barely_rises():
    xs = [1.0, 2.0, 4.0, 8.0]
    ys = [100.0, 101.0, 104.0, 110.0]
    res = find_knee(xs, ys, "TTFT P95")
    assert res.knee is None
    assert "extend the sweep" in res.reason and "10%" in res.reason


def test_no_knee_on_a_straight_line():
    xs = [1.0, 2.0, 3.0, 4.0, 5.0]
    ys = [100.0, 200.0, 300.0, 400.0, 500.0]
    res = find_knee(xs, ys)
    assert res.knee is None and "does not bend" in res.reason


def test_missing_values_are_skipped_and_indices_kept():
    xs = [1.0, None, 2.0, 3.0, 4.0, 5.0]
    ys = [100.0, 999.0, 100.0, 100.0, 400.0, 900.0]
    res = find_knee(xs, ys)
    assert res.knee is not None and res.knee.index == 3


def test_too_few_points_and_mismatched_lengths():
    assert find_knee([1.0, 2.0], [1.0, 5.0]).knee is None
    with pytest.raises(ValueError):
        find_knee([1.0, 2.0, 3.0], [1.0, 2.0])
