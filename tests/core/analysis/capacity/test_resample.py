"""Intervals for the knee, ceiling, watermark and replicas from resampling each step's records, and the
steps whose absence moves the knee (issue 37). Hand-made closed-loop records with known latency."""

from __future__ import annotations

import numpy as np
import pytest

from core.analysis.capacity.test_plan_basis import step
from tokenpace.app.sweep.sweep_capacity import capacity
from tokenpace.core.analysis.capacity.plan import point_from_result
from tokenpace.core.analysis.capacity.resample import step_sample
from tokenpace.core.metrics import summarize
from tokenpace.core.record import RequestRecord, Status
from tokenpace.core.steady import steady_state
from tokenpace.testing.dependent_series import ar1

MS = 1_000_000


def closed_loop(users: int, ttft_ms: float, rng: np.random.Generator, cycles: int = 40) -> dict:
    """``users`` users, each request 20 ms of decode after a TTFT drawn around ``ttft_ms`` (+-20 %)."""
    records = []
    for u in range(users):
        t = 1_000.0
        for k in range(cycles):
            ttft = ttft_ms * rng.uniform(0.8, 1.2)
            r = RequestRecord(request_id=f"{u}-{k}", worker=u, sent_ns=int(t * MS), scheduled_ns=int(t * MS))
            r.status = Status.OK
            r.first_token_ns = int((t + ttft) * MS)
            r.end_ns = int((t + ttft + 20) * MS)
            r.token_ns = [r.first_token_ns, r.end_ns]
            r.output_tokens_counted = 2
            records.append(r)
            t += ttft + 20
    summary = summarize(records).to_dict()
    summary["steady"] = steady_state(records, users).to_dict()
    summary["client"] = {"valid": True}
    load = {"mode": "closed_loop", "concurrency": users, "rate": None}
    return {"conditions": {"load": load}, "summary": summary, "valid": True, "records": records}


def slot_sweep(seed: int = 3) -> tuple[list[dict], list[list[RequestRecord]]]:
    """4 slots: TTFT 10 ms up to 4 users, then each user waits for a slot (TTFT grows with users)."""
    rng = np.random.default_rng(seed)
    steps = [closed_loop(c, 10.0 if c <= 4 else 30.0 * c / 4 - 10, rng) for c in (1, 2, 4, 8, 16)]
    return steps, [s.pop("records") for s in steps]


def test_the_plan_carries_intervals_that_hold_its_figures_and_repeat():
    steps, records = slot_sweep()
    doc = capacity(steps, None, peak_rps=500, records=records)
    plan, knee = doc["plan"], doc["analysis"]["knee"]
    iv = plan["intervals"]
    assert iv["resamples"] == 200 and iv["steps_resampled"] == [1, 2, 3, 4, 5]
    assert knee is not None and knee["step"] == 3  # 4 users: the slot limit
    lo, hi = iv["knee_load_rps_95"]
    assert lo <= knee["load_rps"] <= hi and hi - lo < 0.5 * knee["load_rps"]
    assert iv["knee_step_shares"]["3"] >= 0.9
    w_lo, w_hi = iv["watermark_rps_95"]
    assert w_lo <= plan["watermark_rps_per_replica"] <= w_hi
    r_lo, r_hi = iv["replicas_95"]
    assert r_lo <= plan["replicas"] <= r_hi
    again = capacity(steps, None, peak_rps=500, records=records)  # seeded: the same intervals
    assert again["plan"]["intervals"] == iv


def test_a_step_whose_absence_moves_the_knee_and_the_replicas_is_named():
    # the knee sits at step 4 (7 req/s); without step 1 the curve's range shrinks and Kneedle puts
    # it at step 5, in the queueing region (E2E P95 2 s): the plan says so rather than nothing
    steps = [
        step(1, 1.0, 100, 1000),
        step(2, 2.0, 102, 1000),
        step(4, 3.9, 104, 1000),
        step(8, 7.0, 150, 1200),
        step(16, 9.0, 400, 2000),
        step(32, 9.5, 2000, 4000),
    ]
    doc = capacity(steps, None, peak_rps=40, records=[[]] * len(steps))
    assert doc["analysis"]["knee"]["step"] == 4 and doc["plan"]["replicas"] == 9
    moves = doc["plan"]["intervals"]["left_out_moves"]
    assert (
        "leaving out step 1 moves the knee from step 4 to step 5 (9 req/s) and the replicas from 9 to 7"
        in moves
    )
    assert any(m in doc["plan"]["warnings"] for m in moves)
    assert doc["plan"]["intervals"]["resamples"] == 0  # no records: no interval claimed


def test_resamples_are_bounded():
    steps, records = slot_sweep()
    with pytest.raises(ValueError, match="resamples must be 1 to 2000"):
        capacity(steps, None, records=records, resamples=5000)


def test_a_step_whose_requests_moved_together_is_resampled_in_blocks() -> None:
    def records(latencies: np.ndarray) -> list[RequestRecord]:
        out = []
        for i, ms in enumerate(latencies):
            r = RequestRecord(request_id=str(i), sent_ns=(2000 - i) * 10 * MS)  # stored newest first
            r.status, r.first_token_ns, r.end_ns = (
                Status.OK,
                r.sent_ns + int(ms * MS),
                r.sent_ns + int(2 * ms * MS),
            )
            out.append(r)
        return out

    rng = np.random.default_rng(4)
    steps, _ = slot_sweep()
    p = point_from_result(1, steps[0])
    moved = step_sample(p, records(ar1(rng, 1, 2000, 0.9)[0]), {})
    alone = step_sample(p, records(ar1(rng, 1, 2000, 0.0)[0]), {})
    assert moved is not None and alone is not None
    assert moved.block > 10 and alone.block == 1
