"""A line met on an open-loop run is proven only at the run's steady state: its halves, in send order,
compared by intervals (a rising run is undecided, a flat one passes; a closed loop is not split)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tokenpace.core.analysis.selection.scenarios import Scenario, SloLine
from tokenpace.core.analysis.selection.select import judge, run_point
from tokenpace.core.analysis.selection.settled import growth_interval, halves
from tokenpace.core.metrics import summarize
from tokenpace.core.record import RequestRecord, Status

MS = 1_000_000
RATE = 10.0
LINE = SloLine("ttft", "p95", 400.0)
SCENARIO = Scenario("s", "", 256, 32, RATE, None, (LINE,), None)


def records(ttfts_ms: list[float], warmup: int = 0) -> list[RequestRecord]:
    """One request every 1 / RATE s, sent on schedule, 8 tokens 10 ms apart after the first."""
    out = []
    for i, ttft in enumerate(ttfts_ms):
        t = (10_000 + i * 1000 / RATE) * MS
        r = RequestRecord(request_id=f"r{i}", index=i, warmup=i < warmup, status=Status.OK,
                          scheduled_ns=int(t), dispatched_ns=int(t), sent_ns=int(t))  # fmt: skip
        r.first_token_ns = int(t + ttft * MS)
        r.token_ns = [r.first_token_ns + k * 10 * MS for k in range(8)]
        r.output_tokens_counted = 8
        r.end_ns = r.token_ns[-1]
        r.prompt_tokens = 256
        out.append(r)
    return out


def result(recs: list[RequestRecord], open_loop: bool = True) -> dict:
    return {
        "conditions": {"load": {"mode": "open_loop", "rate": RATE, "concurrency": None}},
        "summary": summarize(recs, open_loop=open_loop).to_dict(),
        "valid": True,
        "interrupted": False,
        "halves": halves(recs, open_loop),
    }


def test_a_flat_open_loop_run_passes():
    rng = np.random.default_rng(1)
    v = judge(SCENARIO, "a", [run_point("a", result(records(list(rng.uniform(50, 150, 1000)))))], sweep=False)
    assert v.cells[0].status == "pass", v.cells[0].reason
    assert v.placement.values["ttft_ms.p95.late.hi"] < 400  # the late half's own bound is shown


def test_a_run_whose_latency_rises_through_it_is_undecided_though_its_every_value_is_under_the_line():
    rng = np.random.default_rng(1)
    rising = [50 + 0.3 * i + x for i, x in enumerate(rng.uniform(0, 40, 1000))]  # 50 -> 390 ms
    v = judge(SCENARIO, "a", [run_point("a", result(records(rising)))], sweep=False)
    cell = v.cells[0]
    assert max(rising) < 400  # every request met the line
    # the trend leaves too few effective requests to bound P95 from above: the sample's maximum is no
    # bound, so the line is not passed (the halves' check decides the same where a bound exists)
    assert cell.upper == math.inf
    assert v.status == "undecided" and cell.status == "undecided"
    assert "a longer run, would decide" in cell.reason


def summary(p95: float, lo: float, hi: float, n_eff: float | None = None) -> dict:
    dist = {"p50": p95 / 2, "p95": p95, "ci95": {"p95": [lo, hi]}, "low_sample": [],
            "n_eff": {} if n_eff is None else {"p95": n_eff}}  # fmt: skip
    return {"ttft_ms": dist, "e2e_ms": {"mean": 200.0}, "request_throughput": RATE,
            "counts": {"sent": 1000, "ok": 1000}, "error_rate": 0.0, "window_s": 100.0}  # fmt: skip


def judged(whole: dict, early: dict | None, late: dict | None) -> tuple[str, str]:
    res = {"conditions": {"load": {"mode": "open_loop", "rate": RATE, "concurrency": None}},
           "summary": whole, "valid": True, "interrupted": False,
           "halves": None if early is None else {"early": early, "late": late}}  # fmt: skip
    cell = judge(SCENARIO, "a", [run_point("a", res)], sweep=False).cells[0]
    return cell.status, cell.reason


def test_the_rise_from_the_early_half_to_the_late_decides_by_its_interval():
    status, reason = judged(summary(300, 280, 350), summary(200, 180, 220), summary(330, 300, 360))
    assert status == "undecided"
    assert "latency still rising through the step: P95 200 ms early, 330 ms late" in reason
    # the same late half, the early one as slow within its interval: flat, passes
    assert judged(summary(300, 280, 350), summary(310, 280, 340), summary(330, 300, 360))[0] == "pass"


def test_a_late_half_whose_bound_is_over_the_line_proves_nothing():
    status, reason = judged(summary(300, 200, 390), summary(280, 150, 420), summary(320, 200, 450))
    assert status == "undecided" and "late half does not prove it" in reason and "450" in reason


def test_a_percentile_on_too_few_effective_requests_is_undecided():
    flat = summary(300, 280, 350)
    status, reason = judged(summary(300, 280, 350, n_eff=40), flat, flat)
    assert status == "undecided" and "rests on 40 effective requests" in reason and "needs 100" in reason
    status, reason = judged(summary(300, 280, 350), flat, summary(300, 280, 350, n_eff=60))
    assert status == "undecided" and "of the late half rests on 60" in reason


def test_a_run_not_split_keeps_the_whole_run_rule():
    assert judged(summary(300, 280, 350, n_eff=40), None, None)[0] == "pass"  # closed loop, no records
    assert halves(records([100.0] * 50), open_loop=False) is None


def test_halves_split_the_measured_requests_in_send_order():
    recs = records([999.0] * 2 + [100.0] * 10 + [300.0] * 10, warmup=2)
    split = halves(recs[::-1], open_loop=True)  # stored in any order; warm-up left out
    assert split is not None
    assert split["early"]["ttft_from_scheduled_ms"]["max"] == pytest.approx(100.0)
    assert split["late"]["ttft_from_scheduled_ms"]["min"] == pytest.approx(300.0)
    assert split["early"]["ttft_from_scheduled_ms"]["n"] == split["late"]["ttft_from_scheduled_ms"]["n"] == 10


def test_growth_interval_combines_each_side_distance_to_its_bound():
    lo, hi = growth_interval(100.0, (90.0, 110.0), 130.0, (120.0, 145.0))
    assert lo == pytest.approx(30 - np.hypot(10, 10))
    assert hi == pytest.approx(30 + np.hypot(15, 10))
