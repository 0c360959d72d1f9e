"""What each capacity verdict rests on (issue 23), on hand-made steps: SLO verdicts by interval with
no break dropped, a growing open-loop queue is saturation, drift blocks the knee and the replica
count, a suspicious curve shape is a warning, and the words say what was (not) checked."""

from __future__ import annotations

from core.analysis.capacity.test_plan_basis import points, step
from tokenpace.adapters.report.plan_lines import plan_lines
from tokenpace.app.sweep.sweep import capacity
from tokenpace.core.analysis.capacity.plan import analyze, little_check, make_plan, point_from_result


def with_ci(d: dict, metric: str, pct: str, lo: float, hi: float) -> dict:
    d["summary"][metric].setdefault("ci95", {})[pct] = [lo, hi]
    return d


def test_a_step_holds_only_when_its_upper_bound_is_under_the_line():
    # the bimodal server: P95 ~ 67 ms at each step, but its interval reaches 252 ms (line: 150 ms)
    steps = [with_ci(step(c, c * 1.5, 67, 600), "ttft_ms", "p95", 55, 252) for c in (1, 2, 4)]
    a = analyze(points(steps), slo={"ttft_ms": 150})
    assert a.slo is not None and a.slo.verdicts == ["undecided"] * 3
    assert a.slo.step is None and a.slo.holds == [None] * 3
    plan = make_plan(a)
    assert any("undecided at step(s) 1, 2, 3" in w and "more requests" in w for w in plan.warnings)


def test_a_break_at_a_lower_load_is_never_dropped():
    # step 1 breaks (its whole interval over the line); steps 2 and 3 "hold" at higher loads
    steps = [
        with_ci(step(1, 1.5, 300, 900), "ttft_ms", "p95", 200, 400),
        with_ci(step(2, 3.0, 60, 600), "ttft_ms", "p95", 55, 70),
        with_ci(step(4, 6.0, 62, 600), "ttft_ms", "p95", 55, 70),
    ]
    a = analyze(points(steps), slo={"ttft_ms": 150})
    assert a.slo is not None and a.slo.verdicts == ["breaks", "holds", "holds"]
    assert a.slo.step is None and a.slo.broken_step == 1 and a.slo.held_above_break == [2, 3]
    warnings = make_plan(a).warnings
    assert any("broke at step 1 but held at step(s) 2, 3" in w for w in warnings)


def test_an_open_loop_step_that_completes_27_of_40_offered_is_overloaded():
    # the issue: ratio 0.71 on ~100 requests passed the old Poisson tolerance (3 / sqrt(n) = 0.3)
    d = step(40, 27.0, 600, 995, mode="open_loop", sent=100)
    d["summary"]["steady"] = {"request_throughput": 27.0, "window_s": 3.7, "send_rate": 38.0}
    check = little_check(point_from_result(1, d))
    assert check.status == "overloaded" and "fell behind" in check.note


def test_a_knee_on_the_lowest_load_and_falling_latency_are_warnings():
    steps = [
        with_ci(step(1, 1.0, 300, 900), "ttft_ms", "p50", 170, 190),
        with_ci(step(2, 2.0, 120, 800), "ttft_ms", "p50", 60, 80),
        with_ci(step(4, 4.0, 125, 800), "ttft_ms", "p50", 62, 82),
    ]
    a = analyze(points(steps))
    assert any("P50 fell from" in w and "step 1" in w and "step 2" in w for w in a.shape)
    falling = make_plan(a).warnings
    assert any("while the load rose" in w for w in falling)


def _drifting_sweep() -> tuple[list[dict], dict]:
    """Steps 1, 2, 4 of a server whose latency grows with time only, and step 1 revisited."""
    steps = []
    for c, p50 in ((1, 30.0), (2, 60.0), (4, 90.0)):
        d = step(c, c * 10.0, p50 * 1.5, p50 * 3)
        d["summary"]["ttft_ms"]["p50"] = p50
        steps.append(with_ci(d, "ttft_ms", "p50", p50 * 0.95, p50 * 1.05))
    again = step(1, 10.0, 180, 360)
    again["summary"]["ttft_ms"]["p50"] = 120.0
    return steps, with_ci(again, "ttft_ms", "p50", 114, 126)


def test_a_step_revisited_with_other_latency_blocks_the_knee_and_the_replicas():
    steps, again = _drifting_sweep()
    doc = capacity(steps, None, peak_rps=100, revisit=again)
    assert doc["analysis"]["drift"]["latency_moved_with_time"] is True
    assert doc["analysis"]["knee"] is None and doc["plan"]["replicas"] is None
    lines = plan_lines(doc)
    assert any(line.startswith("Drift: latency moved with time (step 1 revisited") for line in lines)
    assert not any(line.startswith("Replicas") for line in lines)
    with_slo = plan_lines(capacity(steps, {"ttft_ms": 500}, peak_rps=100, revisit=again))
    assert (
        "SLO: each step's verdict is in the table; no SLO load is read from a sweep that drifted" in with_slo
    )
    steady = capacity(steps, None, peak_rps=100, revisit=steps[0])  # the same latency again
    assert steady["analysis"]["drift"]["latency_moved_with_time"] is False


def test_the_words_say_what_was_checked():
    none_usable = capacity([step(1, 1.0, 80, 600, valid=False)], None)
    lines = plan_lines(none_usable)
    assert "No usable step: no figure" in lines and not any("rest on" in line for line in lines)
    failing = step(1, 1.0, 80, 600)
    failing["summary"]["error_rate"] = 0.5  # failed requests hold slots too: Little's law is skipped
    assert "Little's law (in flight = rate x latency): no step could be checked" in plan_lines(
        capacity([failing], None)
    )
    checked = plan_lines(capacity([step(1, 1.0, 80, 1000), step(2, 2.0, 80, 1000)], None))
    assert "Little's law (in flight = rate x latency): consistent at step(s) 1, 2" in checked
