"""What each capacity figure rests on: left-out steps (invalid, short, interrupted) never feed any of
them, and a figure found at the highest load tried is a lower bound, not a ceiling. Hand-made steps."""

from __future__ import annotations

import math

import pytest

from tokenpace.core.analysis.capacity.plan import analyze, little_check, make_plan, point_from_result


def add_intervals(summary: dict) -> None:
    """A narrow 95 % interval (+-3 %) around every percentile, as a real summary carries."""
    for dist in summary.values():
        if isinstance(dist, dict) and "n" in dist:
            dist["ci95"] = {k: [v * 0.97, v * 1.03] for k, v in dist.items() if k[0] == "p" and v is not None}


def step(
    load: float,
    rps: float,
    ttft95: float,
    e2e95: float,
    *,
    valid: bool = True,
    interrupted: bool = False,
    short: bool = False,
    steady_rps: float | None = None,
    mode: str = "closed_loop",
    sent: int = 400,
    sched_ttft95: float | None = None,
) -> dict:
    e2e_mean = load / rps * 1000 if mode == "closed_loop" else e2e95 * 0.8
    summary = {
        "ttft_ms": {"n": sent, "mean": ttft95 * 0.7, "p50": ttft95 * 0.6, "p95": ttft95},
        "tpot_ms": {"n": sent, "p95": 20.0},
        "e2e_ms": {"n": sent, "mean": e2e_mean, "p50": e2e95 * 0.7, "p95": e2e95},
        "request_throughput": rps,
        "window_s": sent / rps,
        "counts": {"sent": sent, "ok": sent},
        "error_rate": 0.0,
        "goodput": rps,
        "client": {"valid": valid},
    }
    if steady_rps is not None or short:
        steady: dict = {
            "request_throughput": steady_rps,
            "window_s": sent / (steady_rps or rps) * 0.8,
            "short": short,
            "short_reason": "steady window 0.50 s is 20% of the 2.50 s step" if short else "",
        }
        if steady_rps and mode == "closed_loop":  # the steady requests' mean E2E: C / X (Little)
            steady["mean_latency_s"] = load / steady_rps
        summary["steady"] = steady
    if sched_ttft95 is not None:
        summary["ttft_from_scheduled_ms"] = {"n": sent, "p95": sched_ttft95}
        summary["e2e_from_scheduled_ms"] = {"n": sent, "p95": e2e95 + sched_ttft95 - ttft95}
    add_intervals(summary)
    return {
        "valid": valid and not interrupted,
        "interrupted": interrupted,
        "conditions": {
            "load": {
                "mode": mode,
                "concurrency": int(load) if mode == "closed_loop" else None,
                "rate": load if mode == "open_loop" else None,
                "max_concurrency": None,
            }
        },
        "summary": summary,
    }


def points(steps):
    return [point_from_result(i + 1, r) for i, r in enumerate(steps)]


# the issue's sweep: client health invalid at steps 1, 4, 5, 6; step 6 has the highest throughput
ISSUE_SWEEP = [
    step(1, 1.7, 80, 600, valid=False),
    step(2, 3.1, 82, 640),
    step(4, 5.9, 85, 680),
    step(8, 9.6, 95, 830, valid=False),
    step(16, 14.0, 700, 1600, valid=False),
    step(32, 22.6, 2100, 3200, valid=False),
]


def test_invalid_steps_feed_no_figure():
    a = analyze(points(ISSUE_SWEEP), slo={"ttft_ms": 5000})
    assert a.used_steps == [2, 3]
    assert a.left_out == {
        1: ["client NOT VALID"],
        4: ["client NOT VALID"],
        5: ["client NOT VALID"],
        6: ["client NOT VALID"],
    }
    assert a.max_sustainable_rps == 5.9 and a.max_sustainable_step == 3  # not 22.6 from step 6
    assert a.slo is not None and a.slo.step == 3 and a.slo.load_rps == 5.9
    assert a.slo.holds == [None, True, True, None, None, None]
    assert a.knee is None  # two usable steps cannot make a knee
    plan = make_plan(a, peak_rps=100, headroom=0.3)
    assert plan.ceiling_rps == 5.9 and plan.ceiling_step == 3
    assert plan.watermark_rps == pytest.approx(5.9 * 0.7)
    assert plan.used_steps == [2, 3] and plan.to_dict()["rests_on_steps"] == [2, 3]
    assert plan.left_out_steps == [1, 4, 5, 6]
    assert any("left out" in w and "step 6: client NOT VALID" in w for w in plan.warnings)
    d = a.to_dict()
    assert d["used_steps"] == [2, 3]
    assert {"step": 6, "reasons": ["client NOT VALID"]} in d["left_out_steps"]


def test_watermark_in_flight_uses_usable_steps_only():
    # an invalid step with an absurd latency next to the watermark must not bend Little's law there
    steps = [step(1, 1.0, 80, 1000), step(2, 2.0, 80, 1000), step(3, 2.9, 400, 1040)]
    clean = make_plan(analyze(points(steps)), headroom=0.0)
    noisy = [*steps, step(3, 2.95, 80, 90_000, valid=False)]
    with_bad = make_plan(analyze(points(noisy)), headroom=0.0)
    assert with_bad.watermark_in_flight == pytest.approx(clean.watermark_in_flight)


def test_slo_never_broken_is_a_lower_bound_not_a_ceiling():
    steps = [step(1, 1.6, 80, 600), step(2, 3.1, 82, 640), step(4, 5.9, 85, 680), step(8, 9.6, 95, 830)]
    a = analyze(points(steps), slo={"ttft_ms": 500})
    assert a.slo is not None and a.slo.holds == [True] * 4
    assert a.slo.bounded is False and a.slo.broken_step is None
    assert a.slo.to_dict()["ceiling_reached"] is False
    plan = make_plan(a, peak_rps=96, headroom=0.5)
    assert plan.ceiling_is_lower_bound
    assert plan.to_dict()["replicas_is_upper_bound"] is True
    assert plan.replicas == math.ceil(96 / (9.6 * 0.5))
    msg = (
        "SLO held up to the highest load tried (9.6 req/s, step 4); the ceiling is above it: extend the sweep"
    )
    assert msg in plan.warnings
    assert any("lower bound" in w for w in plan.warnings)


def test_slo_broken_at_a_higher_step_is_a_ceiling():
    steps = [step(1, 1.6, 80, 600), step(2, 3.1, 82, 640), step(4, 5.9, 85, 680), step(8, 9.6, 900, 1830)]
    a = analyze(points(steps), slo={"ttft_ms": 500})
    assert a.slo is not None and a.slo.bounded and a.slo.broken_step == 4 and a.slo.step == 3
    plan = make_plan(a)
    assert plan.ceiling_from in ("knee", "slo") and not plan.ceiling_is_lower_bound


def test_slo_broken_only_at_an_invalid_step_is_not_a_ceiling():
    steps = [
        step(1, 1.6, 80, 600),
        step(2, 3.1, 82, 640),
        step(4, 5.9, 85, 680),
        step(8, 9.6, 900, 1830, valid=False),
    ]
    a = analyze(points(steps), slo={"ttft_ms": 500})
    assert a.slo is not None and a.slo.step == 3 and not a.slo.bounded


def test_throughput_still_growing_at_the_last_step_is_a_lower_bound():
    steps = [step(1, 1.6, 80, 600), step(2, 3.1, 82, 640), step(4, 5.9, 85, 680)]
    a = analyze(points(steps))
    assert not a.max_sustainable_bounded
    plan = make_plan(a, peak_rps=30)
    assert plan.ceiling_from == "max_sustainable" and plan.ceiling_is_lower_bound
    # a plateau (less than +10 % for twice the users) is a real maximum
    flat = analyze(points([*steps, step(8, 6.2, 400, 1300)]))
    assert flat.max_sustainable_bounded and flat.max_sustainable_step == 4


def test_knee_on_the_last_usable_step_is_flagged():
    # a noisy curve whose largest Kneedle distance is its last usable step (step 5 is invalid)
    steps = [
        step(1, 1.0, 100, 1000),
        step(2, 2.0, 300, 1000),
        step(4, 3.0, 110, 1000),
        step(8, 8.0, 200, 1000),
        step(16, 9.0, 9000, 9000, valid=False),
    ]
    a = analyze(points(steps))
    assert a.knee is not None and a.knee.index == 3
    assert not a.knee_bounded
    assert a.to_dict()["knee"]["at_highest_load"] is True
    assert any("knee is on the highest load tried (step 4)" in w for w in make_plan(a).warnings)


def test_short_and_interrupted_steps_are_left_out_and_steady_throughput_is_used():
    steps = [
        step(1, 1.5, 80, 600, steady_rps=1.6),
        step(2, 2.9, 82, 640, steady_rps=3.1),
        step(4, 4.0, 85, 680, steady_rps=5.9),
        step(8, 5.0, 95, 830, short=True),
        step(16, 10.0, 700, 1600, interrupted=True),
    ]
    pts = points(steps)
    assert pts[2].achieved_rps == 5.9 and pts[2].steady
    a = analyze(pts)
    assert a.left_out[4][0].startswith("short (steady window")
    assert a.left_out[5] == ["interrupted"]
    assert a.max_sustainable_rps == 5.9 and a.max_sustainable_step == 3


def test_a_step_whose_rate_puts_more_in_flight_than_its_users_carries_no_figure():
    # an older file: a steady rate (5.9/s) counted between an engine's waves, beside the step's mean
    # E2E (1 s): 5.9 requests in flight for 4 users. It is the highest rate, and it is left out.
    steps = [
        step(1, 1.5, 80, 600, steady_rps=1.6),
        step(2, 2.9, 82, 640, steady_rps=3.1),
        step(4, 4.0, 85, 680),
    ]
    high = steps[2]
    high["summary"]["steady"] = {"request_throughput": 5.9, "window_s": 50.0, "short": False}
    a = analyze(points(steps))
    assert a.inconsistent_steps == [3]
    assert a.left_out[3][0].startswith("inconsistent with Little's law (5.9 in flight exceeds concurrency 4")
    assert a.max_sustainable_step == 2 and 3 not in a.used_steps
    plan = make_plan(a)
    assert plan.ceiling_step != 3 and 3 in plan.left_out_steps


def test_open_loop_slo_is_judged_from_the_scheduled_time():
    # service time meets 500 ms everywhere; from the schedule (client cap queueing) step 3 does not
    steps = [
        step(2, 2.0, 100, 600, mode="open_loop", sched_ttft95=110),
        step(4, 4.0, 100, 600, mode="open_loop", sched_ttft95=150),
        step(6, 6.0, 100, 600, mode="open_loop", sched_ttft95=900),
    ]
    a = analyze(points(steps), slo={"ttft_ms": 500})
    assert a.slo is not None and a.slo.basis == "scheduled"
    assert a.slo.holds == [True, True, False] and a.slo.step == 2 and a.slo.bounded


def test_no_usable_step_gives_no_plan():
    a = analyze(points([step(1, 1.0, 80, 600, valid=False), step(2, 2.0, 80, 600, interrupted=True)]))
    plan = make_plan(a, peak_rps=10)
    assert plan.ceiling_rps is None and plan.replicas is None
    assert "no usable step: nothing to plan on" in plan.warnings


def test_an_auto_rate_sweep_up_to_the_probe_plateau_has_a_real_maximum():
    steps = [
        step(2, 2.0, 100, 600, mode="open_loop"),
        step(6, 6.0, 110, 600, mode="open_loop"),
        step(10, 9.8, 150, 700, mode="open_loop"),
    ]
    assert not analyze(points(steps)).max_sustainable_bounded  # the server kept up with 10 req/s
    a = analyze(points(steps), plateau_rps=10.2)  # ... but a closed-loop probe levelled off at 10.2
    assert a.max_sustainable_bounded and a.max_sustainable_step == 3


def test_little_checks_an_open_loop_step_against_the_rate_really_sent():
    # Poisson arrivals with this seed went out at 8 req/s for 10 asked: 8 completions/s is keeping up
    s = step(10, 8.0, 100, 600, mode="open_loop", steady_rps=8.0)
    s["summary"]["steady"]["send_rate"] = 8.0
    c = little_check(point_from_result(1, s))
    assert c.status == "ok" and c.expected == pytest.approx(8.0)


def test_an_open_loop_maximum_is_a_lower_bound_with_the_next_rate_and_its_fate():
    from tokenpace.adapters.report.plan_lines import plan_lines

    steps = [
        step(2, 2.0, 100, 600, mode="open_loop", sched_ttft95=110),
        step(4, 4.0, 100, 600, mode="open_loop", sched_ttft95=150),
        step(6, 6.0, 100, 600, mode="open_loop", sched_ttft95=900),
    ]
    a = analyze(points(steps), slo={"ttft_ms": 500})
    slo = a.to_dict()["slo_capacity"]
    assert slo["ceiling_reached"] and slo["max_load_rps"] == 4.0  # step 3 broke it ...
    assert slo["max_load_is_lower_bound"] and slo["true_max_below_rps"] == 6  # ... somewhere in 4-6
    assert "between 4 and 6 req/s (step 3 broke it: TTFT P95 900 ms" in slo["lower_bound_why"]
    ms = a.to_dict()["max_sustainable"]
    assert ms["lower_bound"] and ms["true_max_below_rps"] is None  # the server kept up with 6 req/s
    assert "no rate above 6 req/s was run" in ms["lower_bound_why"]
    lines = plan_lines({"analysis": a.to_dict(), "plan": make_plan(a).to_dict(), "steps": steps})
    assert any(ln.startswith("Max load under the SLO") and "at least 4 req/s" in ln for ln in lines), lines
    assert any(ln.startswith("Max sustainable throughput: at least 6 req/s") for ln in lines), lines
    # a closed loop's maximum is a step's own achieved rate, not bracketed by rates: as before
    closed = analyze(points([step(1, 4.0, 100, 300), step(2, 6.0, 700, 800)]), slo={"ttft_ms": 500})
    assert not closed.to_dict()["slo_capacity"]["max_load_is_lower_bound"]
