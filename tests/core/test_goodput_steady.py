"""Open-loop goodput from the scheduled time, and the steady window of a run. Hand-made records."""

from __future__ import annotations

import pytest

from tokenpace.core.metrics import Slo, meets_slo, summarize
from tokenpace.core.record import RequestRecord, Status
from tokenpace.core.steady import MIN_STEADY_COMPLETIONS, lengthen_factor, steady_state

MS = 1_000_000
BASE = 10_000  # ms


def rec(sched: float, sent: float, ttft: float, e2e: float, status: Status = Status.OK) -> RequestRecord:
    def ns(ms: float) -> int:
        return int((BASE + ms) * MS)

    r = RequestRecord(request_id="r", scheduled_ns=ns(sched), dispatched_ns=ns(sched), sent_ns=ns(sent))
    r.status = status
    r.first_token_ns = ns(sent + ttft)
    r.token_ns = [ns(sent + ttft), ns(sent + e2e)]
    r.output_tokens_counted = 2
    r.end_ns = ns(sent + e2e)
    return r


def test_open_loop_goodput_counts_from_the_scheduled_time():
    # an open loop with --max-concurrency: every request's service TTFT is 100 ms, but the cap held
    # requests 2-4 back 300, 600 and 900 ms: from the schedule they took 400, 700 and 1000 ms
    records = [rec(0, 0, 100, 200), rec(0, 300, 100, 200), rec(0, 600, 100, 200), rec(0, 900, 100, 200)]
    slo = Slo(ttft_ms=500)
    assert all(meets_slo(r, slo) for r in records)
    assert [meets_slo(r, slo, from_scheduled=True) for r in records] == [True, True, False, False]
    s = summarize(records, slo, open_loop=True)
    window = 1.1  # first send 0 to last completion 1100 ms
    assert s.goodput == pytest.approx(2 / window) and s.goodput_ratio == pytest.approx(0.5)
    assert s.goodput_from_send == pytest.approx(4 / window) and s.goodput_ratio_from_send == 1.0
    d = s.to_dict()
    assert d["goodput_latency_from"] == "scheduled" and d["goodput_from_send"] == pytest.approx(4 / window)
    # E2E from the schedule too: 200 + 900 ms of queueing breaks a 1 s E2E SLO
    assert summarize(records, Slo(e2e_ms=1000), open_loop=True).goodput_ratio == pytest.approx(0.75)


def test_closed_loop_goodput_is_from_the_send_and_both_figures_agree():
    records = [rec(0, 0, 100, 200), rec(0, 300, 100, 200)]  # a closed loop never queues
    s = summarize(records, Slo(ttft_ms=150))
    assert s.goodput == s.goodput_from_send and s.goodput_latency_from == "send"


def closed_loop(users: int, rounds: int, latency_ms: float = 100.0) -> list[RequestRecord]:
    """``users`` users each sending ``rounds`` back-to-back requests of ``latency_ms``."""
    out = []
    for _user in range(users):
        for k in range(rounds):
            t = k * latency_ms
            out.append(rec(t, t, latency_ms / 2, latency_ms))
    return out


def test_steady_window_excludes_ramp_up_and_drain():
    # 10 users x 10 rounds of 100 ms: load reached at 0, first completion at 100, last send at 900,
    # last completion at 1000: steady window (100, 900] holds the completions at 200..900 = 80
    s = steady_state(closed_loop(10, 10), concurrency=10)
    assert s.wall_s == pytest.approx(1.0)
    assert s.ramp_s == pytest.approx(0.1) and s.drain_s == pytest.approx(0.1)
    assert s.window_s == pytest.approx(0.8) and s.completions == 80
    assert s.request_throughput == pytest.approx(100.0)  # C / W = 10 / 0.1 s, exactly
    assert not s.short
    d = s.to_dict()
    assert d["excluded_ramp_up_s"] == pytest.approx(0.1) and d["excluded_drain_s"] == pytest.approx(0.1)


def test_a_short_run_is_flagged_and_the_factor_lengthens_it():
    # 64 users, 2 rounds: steady window (100, 100] is empty
    s = steady_state(closed_loop(64, 2), concurrency=64)
    assert s.short and s.request_throughput is None and "no steady window" in s.reason
    assert lengthen_factor(s) == 8
    # 20 users x 3 rounds: window (100, 200] = 100 ms of a 300 ms step (33 %)
    s3 = steady_state(closed_loop(20, 3), concurrency=20)
    assert s3.short and "33% of the 0.30 s step" in s3.reason
    k = lengthen_factor(s3)
    # ramp 0.1 + 0.6 x drain 0.1 over 0.4 x span 0.2 = 2
    assert k == 2
    longer = steady_state(closed_loop(20, 3 * k), concurrency=20)
    assert longer.fraction >= 0.5 and not longer.short


def test_too_few_users_or_completions_is_short():
    s = steady_state(closed_loop(4, 1), concurrency=8)
    assert s.short and "never reached" in s.reason
    few = steady_state(closed_loop(1, 10), concurrency=1)  # 8 completions inside the window
    assert few.short and f"fewer than {MIN_STEADY_COMPLETIONS}" in few.reason
    assert lengthen_factor(few) >= 1.5 * MIN_STEADY_COMPLETIONS / few.completions


def test_open_loop_steady_window_starts_at_the_first_completion():
    # 1 request every 10 ms for 1 s, each taking 200 ms: ramp 200 ms (nothing completes before), drain
    # 200 ms after the last send at 990; steady (200, 990] holds the completions at 210..990 = 79
    records = [rec(t, t, 100, 200) for t in range(0, 1000, 10)]
    s = steady_state(records, concurrency=None)
    assert s.ramp_s == pytest.approx(0.2) and s.drain_s == pytest.approx(0.2)
    assert s.completions == 79 and s.request_throughput == pytest.approx(79 / 0.79)
    assert s.send_rate == pytest.approx(99 / 0.99)
    failed = [rec(t, t, 100, 200, Status.HTTP_ERROR) for t in range(0, 1000, 10)]
    assert steady_state(failed).completions == 0 and steady_state(failed).short


def test_a_closed_loop_wave_on_the_window_edge_is_not_counted_twice():
    # 4 users in lockstep, 10 rounds of 1000 ms with a few ms of jitter: C / W = 4 req/s exactly. A
    # window opening at the very first completion would count the rest of that wave for free (4.4/s).
    records = []
    for user in range(4):
        for k in range(10):
            t = k * 1000 + user  # each user a millisecond behind the one before
            records.append(rec(t, t, 500, 1000))
    s = steady_state(records, concurrency=4)
    assert s.completions == 32 and s.request_throughput == pytest.approx(4.0)
