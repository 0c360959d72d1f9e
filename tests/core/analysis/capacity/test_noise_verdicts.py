""" "Saturated" and "latency moved with time" only beyond the noise the host explains (issue 37): a
trend inside a step or a revisit's change that two runs of an unchanged server show is no verdict;
one beyond it still is. Hand-made steps with hand-made trends."""

from __future__ import annotations

import math

import pytest

from core.analysis.capacity.test_plan_basis import points, step
from tokenpace.core.analysis.capacity.drift import noise_floor
from tokenpace.core.analysis.capacity.plan import analyze, little_check, point_from_result


def trend(change: float, metric: str = "e2e_ms", first: float = 100.0) -> dict:
    """A step's stored ``time_trend``: significant (p tiny, medians' intervals apart), by ``change``."""
    last = first * (1 + change)
    return {
        "basis": "send",
        "moved": True,
        "rising": change > 0,
        "metrics": [
            {
                "metric": metric,
                "n": 300,
                "spearman_rho": 0.5,
                "p_value": 1e-9,
                "first_third_p50_ms": first,
                "last_third_p50_ms": last,
                "change": change,
                "moved": True,
            }
        ],
    }


def slotted_sweep(change_at_knee: float) -> list[dict]:
    """1, 2, 4, 8 users on 2 slots: E2E P50 flat (100 ms) to 2 users, then queueing; the step past
    the knee (4 users) shows a trend inside it (a queue settling, or host noise)."""
    steps = [step(1, 10.0, 12, 143), step(2, 20.0, 12, 146), step(4, 21.0, 100, 200), step(8, 21.5, 300, 220)]
    steps[2]["time_trend"] = trend(change_at_knee, first=140.0)  # E2E P50s 100-154 ms: a 54 ms range
    return steps


def test_the_floor_is_what_two_runs_of_an_unchanged_server_differ_by():
    assert noise_floor(0.05) == pytest.approx(math.expm1(1.959964 * math.sqrt(2) * 0.05), rel=1e-4)
    assert 0.14 < noise_floor() < 0.15  # the assumed 5 %: 15 %


def test_a_trend_within_the_noise_does_not_refuse_the_knee():
    # 12 %: significant (the old rule's 10 %), but two runs differ by up to 15 % on this host
    a = analyze(points(slotted_sweep(0.12)))
    assert not a.drift.moved, a.drift.reasons
    assert a.knee is not None
    assert a.drift.within_noise and "step 3" in a.drift.within_noise[0]
    moved = analyze(points(slotted_sweep(0.40)))  # 40 %: beyond any noise this host shows
    assert moved.drift.moved and moved.knee is None


def test_a_larger_learned_run_to_run_noise_raises_the_floor():
    assert analyze(points(slotted_sweep(0.20))).drift.moved  # beyond the assumed 15 %
    assert not analyze(points(slotted_sweep(0.20)), run_noise_sd=0.10).drift.moved  # within 32 %


def revisited(change: float, ci: float = 0.02) -> tuple[list[dict], dict]:
    steps = slotted_sweep(0.0)
    steps[2].pop("time_trend")
    first = steps[0]["summary"]["e2e_ms"]["p50"]
    again = step(1, 10.0, 12, 143)
    value = first * (1 + change)
    again["summary"]["e2e_ms"]["p50"] = value
    again["summary"]["e2e_ms"]["ci95"]["p50"] = [value * (1 - ci), value * (1 + ci)]
    steps[0]["summary"]["e2e_ms"]["ci95"]["p50"] = [first * (1 - ci), first * (1 + ci)]
    return steps, again


def test_a_revisit_moves_only_beyond_sampling_and_run_to_run_noise():
    steps, again = revisited(0.25)
    pts = points(steps)
    assert analyze(pts, revisit=point_from_result(5, again)).drift.moved
    # the same 25 % on a host whose runs differ by 12 % (SD): 1.96 x sqrt(2) x 0.12 = 33 % in log
    calm = analyze(pts, revisit=point_from_result(5, again), run_noise_sd=0.12)
    assert not calm.drift.moved and calm.drift.revisit is not None
    assert calm.drift.revisit.change == pytest.approx(0.25)


def test_a_trend_smaller_than_what_the_revisit_saw_is_not_drift():
    # the revisit at the sweep's end moved 19 % (under its 20 % rule: no drift); a 17 % trend inside
    # a step is within what time alone did to the same load; a 35 % one is not
    steps, again = revisited(0.19)
    steps[2]["time_trend"] = trend(0.17, first=140.0)
    a = analyze(points(steps), revisit=point_from_result(5, again))
    assert not a.drift.moved and a.drift.trend_floor == pytest.approx(0.19)
    steps[2]["time_trend"] = trend(0.35, first=140.0)
    assert analyze(points(steps), revisit=point_from_result(5, again)).drift.moved


def test_host_noise_in_an_open_loop_step_far_below_capacity_is_not_saturation():
    # 5 req/s on a server that carries 40: completions keep pace, latency from the schedule rose 12 %
    d = step(5, 5.0, 12, 30, mode="open_loop")
    d["time_trend"] = trend(0.12, "ttft_ms", first=10.0)
    assert little_check(point_from_result(1, d)).status == "ok"
    d["time_trend"] = trend(0.60, "ttft_ms", first=10.0)  # a queue: 60 % up through the step
    check = little_check(point_from_result(1, d))
    assert check.status == "overloaded" and "rose through the step" in check.note
