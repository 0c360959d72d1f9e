"""The SLO per step where a step's requests moved together: undecided, with what would decide it."""

from __future__ import annotations

from core.analysis.capacity.test_plan import points, step
from tokenpace.core.analysis.capacity.plan import analyze


def test_a_step_whose_requests_moved_together_is_undecided_with_what_would_decide() -> None:
    steps = [step(1, 1.6, 80, 600), step(2, 3.1, 82, 640), step(4, 5.9, 85, 680)]
    # step 3's 400 requests are worth 60 independent ones at P95: 3 effective beyond it, under 5
    steps[2]["summary"]["ttft_ms"]["n_eff"] = {"p95": 60.0}
    a = analyze(points(steps), slo={"ttft_ms": 500})
    assert a.slo is not None
    assert a.slo.verdicts == ["holds", "holds", "undecided"]
    assert a.slo.step == 2
    reason = a.slo.reasons[2]
    assert "requests moved together: 400 requests worth 60 independent" in reason
    assert "about 267 more requests" in reason  # 400 x 5 / (0.05 x 60) = 667 requests in all


def test_enough_effective_samples_judge_as_before() -> None:
    steps = [step(1, 1.6, 80, 600), step(2, 3.1, 82, 640)]
    steps[1]["summary"]["ttft_ms"]["n_eff"] = {"p95": 150.0}  # 7.5 effective beyond P95
    a = analyze(points(steps), slo={"ttft_ms": 500})
    assert a.slo is not None and a.slo.verdicts == ["holds", "holds"]


def test_a_step_too_short_even_as_independent_requests_is_judged_as_before() -> None:
    steps = [step(1, 1.6, 80, 600, sent=60), step(2, 3.1, 82, 640, sent=60)]
    steps[1]["summary"]["ttft_ms"]["n_eff"] = {"p95": 20.0}  # 60 x 5 % = 3 beyond P95 even so
    a = analyze(points(steps), slo={"ttft_ms": 500})
    assert a.slo is not None and a.slo.verdicts == ["holds", "holds"]
