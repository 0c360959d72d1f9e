"""Capacity analysis and plan on hand-made sweep steps whose answers are computed by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tokenpace.adapters.report.plan_lines import plan_lines
from tokenpace.core.analysis.capacity.plan import analyze, little_check, make_plan, point_from_result
from tokenpace.core.stats import describe


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
    e2e_mean: float | None = None,
    tpot95: float | None = 20.0,
    mode: str = "closed_loop",
    sent: int = 400,
    errors: float = 0.0,
    goodput: float | None = None,
    valid: bool = True,
) -> dict:
    ok = round(sent * (1 - errors))
    if e2e_mean is None:  # a consistent closed-loop step: L = X * W = concurrency
        e2e_mean = load / rps * 1000 if mode == "closed_loop" else e2e95 * 0.8
    summary = {
        "ttft_ms": {"n": ok, "mean": ttft95 * 0.7, "p50": ttft95 * 0.6, "p95": ttft95},
        "tpot_ms": {"n": ok, "p95": tpot95},
        "e2e_ms": {"n": ok, "mean": e2e_mean, "p50": e2e95 * 0.7, "p95": e2e95},
        "request_throughput": rps,
        "window_s": ok / rps,
        "counts": {"sent": sent, "ok": ok},
        "error_rate": errors,
        "goodput": goodput,
    }
    add_intervals(summary)
    return {
        "valid": valid,
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


# concurrency 1..64: throughput saturates at ~10 req/s, TTFT takes off after c=8
SWEEP = [
    step(1, 1.6, 80, 600),
    step(2, 3.1, 82, 640),
    step(4, 5.9, 85, 680),
    step(8, 9.6, 95, 830),
    step(16, 10.0, 700, 1600),
    step(32, 10.1, 2100, 3200),
    step(64, 10.0, 5000, 6400),
]


def points(steps):
    return [point_from_result(i + 1, r) for i, r in enumerate(steps)]


def test_knee_max_sustainable_and_consistency_of_a_clean_sweep():
    a = analyze(points(SWEEP))
    assert a.knee_ttft.knee is not None and a.knee_ttft.knee.load == 9.6
    assert a.knee is not None and a.knee.load <= 9.6
    assert a.max_sustainable_rps == 10.1 and a.max_sustainable_step == 6
    assert all(c.status == "ok" for c in a.little)
    assert a.little[0].in_flight == pytest.approx(1.0)
    assert a.to_dict()["littles_law"]["consistent"] is True


def test_overall_knee_is_the_lower_load_of_ttft_and_e2e():
    steps = [
        step(1, 1.0, 100, 1000),
        step(2, 2.0, 100, 1000),
        step(4, 4.0, 100, 1050),
        step(6, 6.0, 100, 5000),  # E2E: x'-y' = .369 at 4 req/s, .125 at 6
        step(8, 8.0, 120, 6000),
        step(10, 9.0, 900, 9000),
    ]
    a = analyze(points(steps))
    assert a.knee_ttft.knee is not None and a.knee_ttft.knee.load == 8.0
    assert a.knee_e2e.knee is not None and a.knee_e2e.knee.load == 4.0
    assert a.knee is a.knee_e2e.knee


def test_errors_take_a_step_out_of_the_sustainable_load():
    steps = [*SWEEP[:5], step(32, 12.0, 2100, 3200, errors=0.05)]
    a = analyze(points(steps))
    assert a.max_sustainable_rps == 10.0 and a.max_sustainable_step == 5


def test_slo_capacity_is_the_highest_load_where_the_percentile_holds():
    steps = [
        step(1, 1.6, 80, 600, goodput=1.6),
        step(2, 3.1, 82, 640, goodput=3.1),
        step(4, 5.9, 85, 680, tpot95=None, goodput=5.9),  # no TPOT (1-token outputs) meets the SLO
        step(8, 9.6, 95, 830, tpot95=60, goodput=7.0),  # TPOT broken
        step(16, 10.0, 700, 1600, goodput=1.0),
    ]
    a = analyze(points(steps), slo={"ttft_ms": 500, "tpot_ms": 50})
    assert a.slo is not None
    assert a.slo.holds == [True, True, True, False, False]
    assert a.slo.load_rps == 5.9 and a.slo.step == 3 and a.slo.goodput_rps == 5.9
    p99 = analyze(points(steps), slo={"ttft_ms": 90}, slo_percentile="p95")
    assert p99.slo is not None and p99.slo.load_rps == 5.9


def test_plan_watermark_replicas_and_in_flight():
    a = analyze(points(SWEEP), slo={"ttft_ms": 500})
    plan = make_plan(a, peak_rps=300, headroom=0.3)
    # ceiling = min(knee 9.6, slo 9.6, sustainable 10.1) = 9.6; watermark = 6.72; 300/6.72 = 44.6
    assert plan.ceiling_rps == 9.6
    assert plan.watermark_rps == pytest.approx(6.72)
    assert plan.replicas == 45 == math.ceil(300 / (9.6 * 0.7))
    # in flight at 6.72 req/s: W interpolated between (5.9 rps, 4/5.9 s) and (9.6 rps, 8/9.6 s)
    w0, w1 = 4 / 5.9, 8 / 9.6
    w = w0 + (w1 - w0) * (6.72 - 5.9) / (9.6 - 5.9)
    assert plan.watermark_in_flight == pytest.approx(6.72 * w)
    assert plan.warnings == []


def test_plan_from_an_unsaturated_sweep_warns_and_uses_the_sustainable_load():
    a = analyze(points(SWEEP[:3]))
    plan = make_plan(a, peak_rps=30, headroom=0.5)
    assert plan.ceiling_from == "max_sustainable" and plan.ceiling_rps == 5.9
    assert plan.replicas == math.ceil(30 / 2.95)
    assert any("extend the sweep" in w for w in plan.warnings)


def test_plan_rejects_bad_headroom_and_peak():
    a = analyze(points(SWEEP))
    with pytest.raises(ValueError):
        make_plan(a, headroom=1.0)
    with pytest.raises(ValueError):
        make_plan(a, peak_rps=0)


def test_littles_law_flags_a_closed_loop_step_below_its_concurrency():
    bad = step(8, 9.6, 95, 830, e2e_mean=400.0)  # 9.6/s x 0.4 s = 3.8 in flight, not 8
    c = little_check(point_from_result(4, bad))
    assert c.status == "inconsistent" and c.in_flight == pytest.approx(3.84)
    a = analyze(points([*SWEEP[:3], bad, *SWEEP[4:]]))
    assert a.inconsistent_steps == [4]
    assert any("Little's law" in w and "4" in w for w in make_plan(a).warnings)
    over = little_check(point_from_result(1, step(4, 10.0, 95, 830, e2e_mean=800.0)))  # 8 in flight > 4
    assert over.status == "inconsistent" and "exceeds" in over.note


def test_littles_law_expects_drain_in_a_short_closed_loop_step():
    # 20 requests on 16 users: two rounds, 10 in flight on average
    p = point_from_result(1, step(16, 10.0, 95, 1000, e2e_mean=1000.0, sent=20))
    c = little_check(p)
    assert c.expected == pytest.approx(10.0) and c.status == "ok"


def test_littles_law_open_loop_keeping_up_and_falling_behind():
    # 400 requests at 10/s with W = 0.5 s: due 400 / (40 + 0.5) = 9.88 completions/s
    keep = point_from_result(1, step(10, 9.8, 90, 600, e2e_mean=500.0, mode="open_loop"))
    assert little_check(keep).status == "ok"
    behind = point_from_result(2, step(20, 11.0, 3000, 9000, e2e_mean=8000.0, mode="open_loop"))
    c = little_check(behind)
    assert c.status == "overloaded" and "fell behind" in c.note
    a = analyze([keep, behind])
    assert a.max_sustainable_rps == 9.8  # the overloaded step does not count


def test_steps_with_many_errors_are_not_checked():
    c = little_check(point_from_result(1, step(8, 5.0, 95, 830, errors=0.2)))
    assert c.status == "skipped" and "errors" in c.note


def test_independent_64_request_steps_keep_their_p95_slo_capacity_and_ceiling():
    # 64 requests bound no P95 even if independent: its interval stays clamped at the maximum (as
    # before any side could open), so the steps under the line hold and the plan has a ceiling
    rng = np.random.default_rng(5)
    steps = [step(c, rps, 90, 700, sent=64) for c, rps in ((1, 1.6), (2, 3.1), (4, 5.9), (8, 9.6))]
    for s, median in zip(steps, (80, 82, 85, 900), strict=True):
        s["summary"]["ttft_ms"] = describe(median * rng.lognormal(0, 0.5, 64), ordered=True).to_dict()
        assert None not in s["summary"]["ttft_ms"]["ci95"]["p95"]
    a = analyze(points(steps), slo={"ttft_ms": 500}, slo_percentile="p95")
    assert a.slo is not None and a.slo.holds == [True, True, True, False]
    assert a.slo.load_rps == 5.9 and a.slo.bounded
    plan = make_plan(a, peak_rps=30)
    assert plan.ceiling_rps is not None and plan.replicas is not None


def test_an_open_side_is_an_undecided_step_and_the_plan_still_forms():
    # a step whose P95 (and P50) its requests left unbounded, as stored (None): undecided, said so
    steps = [step(1, 1.6, 80, 600), step(2, 3.1, 82, 640), step(4, 5.9, 85, 680), step(8, 9.6, 900, 830)]
    steps[1]["summary"]["ttft_ms"]["ci95"]["p95"][1] = None
    steps[2]["summary"]["ttft_ms"]["ci95"]["p50"] = [None, None]
    a = analyze(points(steps), slo={"ttft_ms": 500}, slo_percentile="p95")
    assert a.slo is not None and a.slo.holds == [True, None, True, False]
    assert "unbounded" in a.slo.reasons[1], a.slo.reasons
    plan = make_plan(a, peak_rps=30)
    assert plan.ceiling_rps is not None and plan.replicas is not None
    lines = plan_lines({"analysis": a.to_dict(), "plan": plan.to_dict(), "steps": steps})
    assert not any("inf" in ln for ln in lines), lines
