"""The scale-out signal: where GPU utilisation passed 70 %, where the queue climbed, which came
first and against the knee, each decided by intervals or said undecided."""

from __future__ import annotations

from tokenpace.core.analysis.capacity.scale_signal import scale_signal


def _step(
    util: float | None, util_half: float = 2.0, waiting: float | None = 0.0, w_half: float = 0.1
) -> dict:
    gpu = (
        {}
        if util is None
        else {"util_pct": {"mean": util, "ci95": [util - util_half, util + util_half], "n": 20}}
    )
    gpu["power_w"] = {"mean": 100 + 5 * (util or 0)}
    queue = (
        {}
        if waiting is None
        else {"waiting": {"mean": waiting, "ci95": [waiting - w_half, waiting + w_half], "n": 20}}
    )
    return {"gpu_metrics": {"steady": gpu}, "server_metrics": {"steady": queue}}


def test_both_crossings_decided_and_utilisation_first_leading_the_knee():
    steps = [_step(30), _step(55), _step(80), _step(95, waiting=0.2), _step(99, waiting=6)]
    s = scale_signal(steps, [1, 2, 3, 4, 5], knee_step=5)
    assert s is not None
    assert s["util_passed"] == {"step": 3, "after_step": 2, "decided": True, "text": s["util_passed"]["text"]}
    assert "at step 3 (step 2 below)" in s["util_passed"]["text"]
    assert s["queue_climbed"]["step"] == 5 and s["queue_climbed"]["decided"]
    assert s["first"] == "utilisation"
    assert s["signal_vs_knee"]["order"] == "together"  # both hold first at step 5, the knee's step
    assert [r["util_decision"] for r in s["steps"]] == ["below", "below", "above", "above", "above"]
    assert s["steps"][2]["power_w"] == 500


def test_the_signal_leads_a_later_knee():
    steps = [_step(30), _step(80, waiting=3), _step(95, waiting=8), _step(99, waiting=20)]
    s = scale_signal(steps, [1, 2, 3, 4], knee_step=4)
    assert s["first"] == "together"
    assert s["signal_vs_knee"]["order"] == "signal first"
    assert "it leads" in s["signal_vs_knee"]["text"]


def test_an_undecided_step_makes_the_crossing_an_interval_and_the_order_undecided():
    steps = [_step(40), _step(71, util_half=15), _step(90), _step(95, waiting=0.4, w_half=1.0)]
    s = scale_signal(steps, [1, 2, 3, 4], knee_step=2)
    u = s["util_passed"]
    assert (u["step"], u["after_step"], u["decided"]) == (3, 1, False)
    assert "after step 1, by step 3" in u["text"] and "step(s) 2 undecided" in u["text"]
    q = s["queue_climbed"]
    assert q["step"] is None and not q["decided"] and "undecided" in q["text"]
    assert s["first"] == "utilisation"  # the queue was below through step 3, utilisation above by it
    assert s["signal_vs_knee"]["order"] == "knee first"  # the signal holds at step 4 at the earliest
    later = scale_signal(steps, [1, 2, 3, 4], knee_step=4)["signal_vs_knee"]
    assert later["order"] == "undecided"  # at step 4 or beyond: the knee's step or after it
    steps[2] = _step(90, util_half=30)
    assert scale_signal(steps, [1, 2, 3, 4], knee_step=None)["first"] == "undecided"


def test_utilisation_past_the_line_at_the_lowest_load_is_said_so_not_decided():
    s = scale_signal([_step(90), _step(95)], [1, 2], knee_step=None)
    assert s["util_passed"]["step"] == 1 and not s["util_passed"]["decided"]
    assert "or below it" in s["util_passed"]["text"]
    assert s["signal_vs_knee"]["text"].endswith("no knee to compare")


def test_a_line_never_passed_is_decided_when_every_step_is_below_it():
    s = scale_signal([_step(20), _step(40), _step(60)], [1, 2, 3], knee_step=3)
    assert s["util_passed"]["step"] is None and s["util_passed"]["decided"]
    assert "at no step" in s["util_passed"]["text"]
    assert s["first"] == "neither"
    assert s["signal_vs_knee"]["order"] == "knee first"


def test_steps_are_taken_in_the_load_order_given():
    steps = [_step(95), _step(20), _step(50)]  # run out of order
    s = scale_signal(steps, [2, 3, 1], knee_step=None)
    assert s["util_passed"]["step"] == 1 and s["util_passed"]["after_step"] == 3


def test_no_reading_at_any_step_gives_no_signal():
    assert scale_signal([{"summary": {}}, {}], [1, 2], knee_step=1) is None
