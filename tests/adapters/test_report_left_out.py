"""Sweep charts mark the steps the analysis left out: no line runs through them, and they are drawn
apart with the reason (issue 23: the playbook's chart drew a short step as if it counted)."""

from __future__ import annotations

from tokenpace.adapters.report.figures import latency_curve, throughput_curve


def _step(c: int, rps: float, p95: float) -> dict:
    summary = {
        "ttft_ms": {"p50": p95 / 2, "p95": p95, "p99": p95 * 1.2},
        "request_throughput": rps,
        "goodput": rps,
        "output_token_throughput": rps * 100,
    }
    return {"conditions": {"load": {"mode": "closed_loop", "concurrency": c}}, "summary": summary}


SWEEP = {
    "steps": [_step(1, 2.0, 50), _step(2, 4.0, 55), _step(4, 9.0, 900)],
    "analysis": {"left_out_steps": [{"step": 3, "reasons": ["short (steady window 0.5 s)"]}]},
}


def test_a_left_out_step_is_no_point_of_any_line_and_is_marked_with_its_reason():
    for fig in (latency_curve(SWEEP, "ttft_ms", "TTFT"), throughput_curve(SWEEP)):
        lines = [t for t in fig.data if getattr(t, "mode", None) == "lines+markers"]
        assert lines and all(t.y[2] is None for t in lines)  # the line stops before step 3
        marked = [t for t in fig.data if t.name == "left out (not in any figure)"]
        assert len(marked) == 1 and marked[0].text == ("step 3: short (steady window 0.5 s)",)
