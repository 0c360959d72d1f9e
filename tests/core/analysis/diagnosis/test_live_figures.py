"""A run's figures so far: percentiles over every measured record, tokens/s, errors, the client's
lag, and a bounded series of per-interval points."""

from __future__ import annotations

import pytest

from tokenpace.core.analysis.diagnosis.live_figures import MAX_POINTS, ClientNow, LiveFigures
from tokenpace.core.record import RequestRecord, Status

MS = 1_000_000


def rec(
    i: int, ttft_ms: float, tokens: int = 5, status: Status = Status.OK, warmup: bool = False
) -> RequestRecord:
    sent = 1_000 * MS + i * MS
    first = sent + int(ttft_ms * MS)
    toks = [first + k * 10 * MS for k in range(tokens)] if status is Status.OK else []
    return RequestRecord(
        request_id=f"r{i}",
        index=i,
        warmup=warmup,
        scheduled_ns=sent - 2 * MS,
        dispatched_ns=sent,
        sent_ns=sent,
        first_token_ns=first if status is Status.OK else None,
        token_ns=toks,
        output_tokens_counted=len(toks),
        end_ns=(toks[-1] if toks else sent + 50 * MS),
        status=status,
    )


def test_percentiles_cover_every_record_so_far_and_warmup_is_apart() -> None:
    live = LiveFigures()
    live.fold([rec(i, 100.0) for i in range(50)] + [rec(99, 9.0, warmup=True)], 1.0, ClientNow())
    snap = live.fold([rec(100 + i, 300.0) for i in range(50)], 2.0, ClientNow(in_flight=7, loop_lag_ms=3.5))
    assert snap.done == 100 and snap.ok == 100 and snap.warmup == 1
    assert snap.p50["ttft_ms"] == pytest.approx(200.0, rel=0.02)  # halfway between 100 and 300
    assert snap.p95["ttft_ms"] == pytest.approx(300.0, rel=0.01)
    assert snap.p95["tpot_ms"] == pytest.approx(10.0, rel=0.01)  # 10 ms between tokens
    assert snap.in_flight == 7 and snap.client["loop_lag_ms"] == 3.5
    assert snap.client["dispatch_lag_p95_ms"] == pytest.approx(2.0, rel=0.01)


def test_tokens_per_second_over_the_run_and_over_the_last_interval() -> None:
    live = LiveFigures()
    live.fold([rec(i, 50.0, tokens=10) for i in range(4)], 2.0, ClientNow())  # 40 tokens in 2 s
    snap = live.fold([rec(10, 50.0, tokens=10)], 3.0, ClientNow())  # 10 tokens in the next 1 s
    assert snap.output_tokens_per_s == pytest.approx(50 / 3.0)
    assert snap.recent_tokens_per_s == pytest.approx(10.0)
    first_sent = rec(0, 50.0).sent_ns  # with the records' clock: from the first send on, not the start
    snap = live.fold([], 4.0, ClientNow(), now_ns=first_sent + 2_000 * MS)
    assert snap.output_tokens_per_s == pytest.approx(50 / 2.0)


def test_errors_counted_by_status_and_left_out_of_latencies() -> None:
    live = LiveFigures()
    batch = [rec(0, 100.0), rec(1, 0, status=Status.TIMEOUT), rec(2, 0, status=Status.HTTP_ERROR)]
    snap = live.fold(batch, 1.0, ClientNow())
    assert snap.failed == 2 and snap.errors == {"timeout": 1, "http_error": 1}
    assert snap.error_rate == pytest.approx(2 / 3)
    assert snap.p50["ttft_ms"] == pytest.approx(100.0, rel=0.01)
    assert snap.to_dict()["series"][-1] == {
        "t": 1.0, "ttft_p50": snap.p50["ttft_ms"], "ttft_p95": snap.p95["ttft_ms"],
        "tok_s": 5.0, "done": 3, "failed": 2,
    }  # fmt: skip


def test_before_any_record_the_figures_are_empty_not_zero() -> None:
    snap = LiveFigures().fold([], 1.0, ClientNow())
    assert snap.done == 0 and snap.p95 == {"ttft_ms": None, "tpot_ms": None, "e2e_ms": None}
    assert snap.error_rate == 0.0


def test_the_series_stays_bounded_and_spans_the_whole_run() -> None:
    live = LiveFigures()
    for second in range(1, 3 * MAX_POINTS):
        snap = live.fold([rec(second, 100.0)], float(second), ClientNow())
    assert len(snap.series) < MAX_POINTS
    assert snap.series[0]["t"] < MAX_POINTS / 2 and snap.series[-1]["t"] == 3 * MAX_POINTS - 1
    times = [p["t"] for p in snap.series]
    assert times == sorted(times)
