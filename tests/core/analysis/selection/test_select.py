"""Selection rules on hand-made runs: the upper bound decides, the load is the scenario's, runs that
cannot be trusted are left out, a sweep's scenario is bounded by the next valid step above it."""

from __future__ import annotations

import pytest

from tokenpace.core.analysis.selection.scenarios import Scenario, SloLine
from tokenpace.core.analysis.selection.select import judge, run_point

TTFT_LINE = SloLine("ttft", "p95", 800.0)


def scenario(rate: float | None = 4.0, concurrency: int | None = None, attainment: float | None = None):
    return Scenario("s", "", 512, 64, rate, concurrency, (TTFT_LINE,), attainment)


def result(
    p95: float,
    hi: float,
    *,
    mode: str = "open_loop",
    load: float = 4.0,
    rps: float | None = None,
    valid: bool = True,
    interrupted: bool = False,
    low: tuple[str, ...] = (),
    ok: int = 200,
    errors: int = 0,
    short: bool = False,
) -> dict:
    sent = ok + errors
    rps = rps if rps is not None else (load if mode == "open_loop" else load * 2)
    window = ok / rps
    e2e_mean_ms = 1000 * (load / rps) if mode == "closed_loop" else 200.0  # Little-consistent
    return {
        "conditions": {
            "load": {
                "mode": mode,
                "concurrency": int(load) if mode == "closed_loop" else None,
                "rate": load if mode == "open_loop" else None,
            }
        },
        "summary": {
            "ttft_ms": {
                "p50": p95 / 2,
                "p95": p95,
                "ci95": {"p95": [p95 * 0.9, hi]},
                "low_sample": list(low),
            },
            "e2e_ms": {"mean": e2e_mean_ms, "p95": 300.0, "ci95": {"p95": [290.0, 310.0]}},
            "prompt_tokens": {"mean": 512.0},
            "output_tokens": {"mean": 64.0},
            "request_throughput": rps,
            "counts": {"sent": sent, "ok": ok},
            "error_rate": errors / sent,
            "window_s": window,
            "steady": {"short": True, "short_reason": "no steady state"} if short else {},
        },
        "valid": valid,
        "interrupted": interrupted,
    }


def test_a_percentile_under_the_line_is_undecided_when_its_upper_bound_is_not():
    v = judge(scenario(), "a", [run_point("a", result(700, 820), good=200)], sweep=False)
    assert v.status == "undecided" and v.cells[0].status == "undecided"
    assert "upper bound 820" in v.cells[0].reason and "not" in v.cells[0].reason
    over = judge(scenario(), "c", [run_point("c", result(810, 900), good=200)], sweep=False)
    assert over.status == "fail"  # FAIL only when the percentile itself misses the line
    ok = judge(scenario(), "b", [run_point("b", result(700, 790), good=200)], sweep=False)
    assert ok.status == "pass"
    assert ok.margin == pytest.approx(1 - 790 / 800)


def test_a_single_run_at_another_load_is_flagged_not_judged():
    v = judge(scenario(rate=4.0), "a", [run_point("a", result(100, 120, load=8.0))], sweep=False)
    assert v.status == "unknown"
    assert all("not at the scenario's load" in c.reason for c in v.cells)
    closed = judge(
        scenario(rate=4.0), "c", [run_point("c", result(100, 120, mode="closed_loop"))], sweep=False
    )
    assert closed.status == "unknown" and "open-loop" in closed.cells[0].reason


@pytest.mark.parametrize(
    ("kwargs", "why"),
    [
        ({"valid": False}, "NOT VALID"),
        ({"short": True}, "short (no steady state)"),
        ({"interrupted": True}, "interrupted"),
        ({"ok": 0, "errors": 10}, "no successful request"),
    ],
)
def test_runs_that_cannot_be_trusted_are_never_judged(kwargs, why):
    v = judge(scenario(), "a", [run_point("a", result(100, 120, **kwargs))], sweep=False)
    assert v.status == "unknown"
    assert why in v.placement.where


def test_too_few_samples_beyond_the_percentile_is_not_a_verdict():
    v = judge(scenario(), "a", [run_point("a", result(100, 120, low=("p95",)))], sweep=False)
    assert v.cells[0].status == "unknown"
    assert "needs 100" in v.cells[0].reason


def test_between_two_steps_only_the_next_measured_load_above_bounds_the_scenario():
    steps = [
        run_point("s-01", result(100, 200, load=2.0), good=200),
        run_point("s-02", result(9999, 9999, load=4.0, valid=False), good=0),  # left out
        run_point("s-03", result(700, 1000, load=6.0), good=200),
    ]
    v = judge(scenario(rate=4.0), "sweep", steps, sweep=True)
    assert v.placement.runs == ("s-03",)  # no straight line to 600 ms: the 6 req/s step bounds it
    assert v.cells[0].upper == pytest.approx(1000.0) and v.cells[0].status == "undecided"
    assert "next load measured above" in v.placement.where
    assert any("s-02 left out" in w for w in v.warnings)


def test_the_issues_slot_limit_case_is_not_passed_by_a_straight_line():
    # steps at 10 and 30 req/s; at 20 req/s a slot limit put the real P95 at 197 ms (the line
    # between the steps said 135.5): only the 30 req/s step may judge 20 req/s, and it fails
    steps = [
        run_point("s-01", result(60, 74, load=10.0), good=200),
        run_point("s-02", result(180, 197, load=30.0), good=200),
    ]
    line = Scenario("s", "", 512, 64, 20.0, None, (SloLine("ttft", "p95", 150.0),), None)
    v = judge(line, "sweep", steps, sweep=True)
    assert v.status == "fail" and v.placement.runs == ("s-02",)


def test_a_rate_scenario_on_a_closed_loop_sweep_is_not_enough_evidence():
    # the issue: a closed-loop sweep whose achieved rate passed 22 req/s was "trusted", margin 61 %
    steps = [
        run_point(f"c-0{c}", result(40, 58, mode="closed_loop", load=c, rps=c * 6.0), good=200)
        for c in (1, 2, 4, 8)
    ]
    line = Scenario("s", "", 512, 64, 22.0, None, (SloLine("ttft", "p95", 150.0),), None)
    v = judge(line, "sweep", steps, sweep=True)
    assert v.status == "unknown" and not v.placement.trusted
    assert "not enough evidence" in v.placement.where and "open-loop" in v.placement.where
    assert v.margin is None


def test_a_sweep_past_its_highest_step_judges_nothing_and_below_its_lowest_uses_the_lowest():
    steps = [run_point("s-01", result(100, 200, load=2.0)), run_point("s-02", result(300, 400, load=3.0))]
    beyond = judge(scenario(rate=10.0), "sweep", steps, sweep=True)
    assert beyond.status == "unknown" and "beyond" in beyond.placement.where
    below = judge(scenario(rate=1.0), "sweep", steps, sweep=True)
    assert below.placement.runs == ("s-01",) and below.status == "pass"


def test_a_step_at_the_scenario_load_is_used_alone():
    steps = [
        run_point(f"s-0{i}", result(100 * i, 100 * i + 50, mode="closed_loop", load=i)) for i in (1, 2, 4)
    ]
    v = judge(scenario(rate=None, concurrency=2), "sweep", steps, sweep=True)
    assert v.placement.runs == ("s-02",)
    assert v.cells[0].upper == pytest.approx(250.0)


def test_attainment_and_errors_are_cells_of_their_own():
    v = judge(
        scenario(attainment=0.95),
        "a",
        [run_point("a", result(100, 120, ok=190, errors=10), good=180)],
        sweep=False,
    )
    lines = {c.line.split()[0]: c for c in v.cells}
    assert lines["attainment"].status == "fail" and lines["attainment"].value == pytest.approx(0.9)
    assert lines["errors"].status == "fail"
    assert v.status == "fail"


def test_latency_measured_at_another_input_length_is_not_trusted():
    r = result(100, 120)
    r["summary"]["prompt_tokens"]["mean"] = 128.0
    r["summary"]["output_tokens"]["mean"] = 16.0
    v = judge(scenario(), "a", [run_point("a", r)], sweep=False)
    assert v.cells[0].status == "unknown" and "measured at ~128 tokens" in v.cells[0].reason
    assert any("~16 output tokens" in w for w in v.warnings)


def test_a_step_that_littles_law_shows_off_its_load_is_left_out():
    r = result(100, 120, mode="closed_loop", load=8.0)
    r["summary"]["e2e_ms"]["mean"] = 50.0  # 16 req/s x 0.05 s = 0.8 in flight at 8 users: client-bound
    v = judge(scenario(rate=None, concurrency=8), "a", [run_point("a", r)], sweep=False)
    assert v.status == "unknown" and "not at its stated load" in v.placement.where


def test_an_open_loop_run_is_judged_from_the_scheduled_send_time_like_plan():
    r = result(100, 120)
    r["summary"]["ttft_from_scheduled_ms"] = {"n": 200, "p95": 900.0, "ci95": {"p95": [850.0, 950.0]}}
    v = judge(scenario(), "a", [run_point("a", r)], sweep=False)
    assert v.cells[0].upper == 950.0 and v.status == "fail"  # the client queue counts: users waited


def test_a_left_out_step_that_would_judge_the_scenario_makes_it_undecided_with_its_reason():
    beyond = result(100, 120, load=8.0)
    beyond["beyond_profile"] = "offered load past what the calibration saw"  # a predicted step
    steps = [run_point("p#1", result(100, 120, load=2.0), good=200), run_point("p#2", beyond, good=200)]
    v = judge(scenario(rate=8.0), "pred", steps, sweep=True)
    assert v.status == "undecided" and not v.placement.trusted and v.placement.runs == ("p#2",)
    assert all(c.status == "undecided" for c in v.cells)
    assert "offered load past what the calibration saw" in v.cells[0].reason
    assert judge(scenario(rate=2.0), "pred", steps, sweep=True).status == "pass"  # within: judged
    # past every step, left out or not, nothing is guessed: unknown, measure it
    assert judge(scenario(rate=10.0), "pred", steps, sweep=True).status == "unknown"


def test_a_line_met_on_an_open_loop_run_whose_queue_grew_is_undecided():
    # 4 req/s offered, 3 completed a second: the server fell behind (Little's law: overloaded), so a
    # longer run sees a longer queue; percentiles under the line here do not prove the steady state
    grew = run_point("a", result(700, 790, load=4.0, rps=3.0), good=200)
    assert "queue grew" in grew.caveat and not grew.left_out
    v = judge(scenario(attainment=0.9), "a", [grew], sweep=False)
    assert v.status == "undecided" and v.status != "pass"
    assert v.cells[0].status == "undecided" and "a longer run would decide" in v.cells[0].reason
    assert next(c for c in v.cells if c.line.startswith("attainment")).status == "undecided"
    kept_up = judge(scenario(), "b", [run_point("b", result(700, 790, load=4.0), good=200)], sweep=False)
    assert kept_up.status == "pass"  # the same percentiles where the server kept up: a pass
