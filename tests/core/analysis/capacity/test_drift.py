"""A drift the sweep detected is reported even when the figures survive it: a cold start slows the
first steps run (an --auto sweep's probe, a short attempt rerun longer, the first curve step), each
flags a falling trend, and the drift report names all three, each with why no figure moves, while
the knee stands. Hand-made steps with hand-made trends."""

from __future__ import annotations

import pytest

from core.analysis.capacity.test_noise_verdicts import revisited, slotted_sweep, trend
from core.analysis.capacity.test_plan_basis import points, step
from tokenpace.adapters.report.plan_lines import plan_lines
from tokenpace.core.analysis.capacity.plan import analyze, make_plan, point_from_result


def cold_start() -> tuple[list[dict], list[tuple[str, dict]]]:
    steps = slotted_sweep(0.0)
    steps[2].pop("time_trend")
    # E2E P50s 100-154 ms: a 54 ms range; the first step's slow start moved it 12 ms, under a quarter
    steps[0]["time_trend"] = trend(-0.12, first=100.0)
    off_curve = [("probe (run 1)", trend(-0.6, first=250.0)), ("short attempt (run 2)", trend(-0.3))]
    return steps, off_curve


def test_three_cold_start_drifts_are_all_reported_and_the_figures_stand():
    steps, off_curve = cold_start()
    a = analyze(points(steps), off_curve=off_curve)
    assert not a.drift.moved and a.knee is not None  # the figures survive it ...
    detected = a.drift.detected
    assert len(detected) == 3, detected  # ... and every one of the three is said
    assert detected[0].startswith("step 1: E2E P50 100 -> 88 ms") and "no figure moves" in detected[0]
    assert detected[1].startswith("probe (run 1): E2E P50 250 -> 100 ms") and "off the curve" in detected[1]
    assert detected[2].startswith("short attempt (run 2)")
    doc = a.to_dict()
    assert doc["drift"]["detected_figures_stand"] == detected
    lines = plan_lines({"analysis": doc, "plan": make_plan(a).to_dict(), "steps": steps})
    assert sum(ln.startswith("Drift seen, the figures stand:") for ln in lines) == 3, lines


def test_an_open_loop_step_that_slowed_at_its_start_and_a_left_out_one_are_said_too():
    steps = [step(r, float(r), 100, 600, mode="open_loop") for r in (2, 4, 6)]
    steps[0]["time_trend"] = trend(-0.5)
    steps[2] = step(6, 6.0, 100, 600, mode="open_loop", short=True)
    steps[2]["time_trend"] = trend(0.5)
    detected = analyze(points(steps)).drift.detected
    assert len(detected) == 2
    assert "a cold start or a warm-up" in detected[0] and "left out of every figure" in detected[1]


def test_a_trend_no_step_flagged_is_no_drift_seen():
    steps, _ = cold_start()
    steps[0].pop("time_trend")
    assert analyze(points(steps), off_curve=[("probe (run 1)", None)]).drift.detected == []


def test_a_revisit_whose_p50_has_an_open_side_still_sees_the_drift():
    # the first run's P50 unbounded above (its requests moved together; None as stored): the noise
    # comes from its bounded side, so a 25 % rise when revisited is still drift ...
    steps, again = revisited(0.25)
    first = steps[0]["summary"]["e2e_ms"]
    first["ci95"]["p50"][1] = None
    drift = analyze(points(steps), revisit=point_from_result(5, again)).drift
    assert drift.moved and drift.revisit is not None and "E2E P50" in drift.revisit.notes[0]
    # ... and not where that bounded side is as wide as the rise (20 %): its noise explains it
    steps, again = revisited(0.25, ci=0.2)
    steps[0]["summary"]["e2e_ms"]["ci95"]["p50"][1] = None
    drift = analyze(points(steps), revisit=point_from_result(5, again)).drift
    assert not drift.moved and drift.revisit is not None and drift.revisit.change == pytest.approx(0.25)
