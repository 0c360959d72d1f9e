"""Metric definitions on hand-made records whose answers were computed by hand."""

import pytest

from tokenpace.core.metrics import Slo, itl_gaps_ns, meets_slo, summarize, tpot_ns, window_ns
from tokenpace.core.record import RequestRecord, Status

MS = 1_000_000
BASE = 10_000  # ms; a send time of 0 would mean "never sent"


def rec(sent, first, tokens, end, out_server=None, status=Status.OK, warmup=False, sched=None, **kw):
    def ns(ms):
        return (BASE + ms) * MS

    sched = sent if sched is None else sched
    r = RequestRecord(
        request_id="r",
        sent_ns=ns(sent),
        warmup=warmup,
        status=status,
        scheduled_ns=ns(sched),
        dispatched_ns=ns(sched),
        **kw,
    )
    r.first_token_ns = None if first is None else ns(first)
    r.first_answer_ns = r.first_token_ns
    r.token_ns = [ns(t) for t in tokens]
    r.output_tokens_counted = len(tokens)
    r.output_tokens_server = out_server
    r.end_ns = None if end is None else ns(end)
    return r


def test_ttft_tpot_e2e_of_one_request():
    # sent at 0, first token at 100 ms, 5 tokens, done at 500 ms:
    # TTFT 100, E2E 500, TPOT = (500 - 100) / (5 - 1) = 100
    r = rec(0, 100, [100, 200, 300, 400, 500], 500)
    s = summarize([r])
    assert s.ttft_ms.p50 == 100
    assert s.e2e_ms.p50 == 500
    assert s.tpot_ms.p50 == 100
    assert s.itl_ms.n == 4 and s.itl_ms.mean == 100


def test_tpot_undefined_for_one_token_and_uses_server_count():
    one = rec(0, 50, [50], 60)
    assert tpot_ns(one) is None
    # 2 chunks but the server says 9 tokens: TPOT = (400 - 100) / (9 - 1) = 37.5 ms
    multi = rec(0, 100, [100, 400], 400, out_server=9)
    assert tpot_ns(multi) == pytest.approx(37.5 * MS)
    s = summarize([one, multi])
    assert s.tpot_ms.n == 1
    assert s.tokens.tokens_per_chunk == pytest.approx(4.5)
    assert s.tokens.mismatched == 1 and s.tokens.max_abs_diff == 7


def test_itl_is_per_gap_between_token_chunks():
    r = rec(0, 10, [10, 15, 35, 36], 40)
    assert itl_gaps_ns(r) == [5 * MS, 20 * MS, 1 * MS]


def test_failed_and_warmup_requests_are_left_out_of_latency_but_counted():
    ok = rec(0, 100, [100, 200], 200)
    warm = rec(0, 1, [1, 2], 2, warmup=True)
    failed = rec(0, None, [], 50, status=Status.HTTP_ERROR, error="HTTP 500")
    timeout = rec(0, 20, [20], 900, status=Status.TIMEOUT)
    cut = rec(0, 20, [20, 30], 30, status=Status.STREAM_INTERRUPTED)
    cancelled = rec(0, None, [], 10, status=Status.CANCELLED)
    s = summarize([ok, warm, failed, timeout, cut, cancelled])
    assert s.ttft_ms.n == 1 and s.ttft_ms.p50 == 100
    assert s.counts["sent"] == 5  # warm-up excluded
    assert s.counts["ok"] == 1 and s.counts["cancelled"] == 1
    assert s.error_rate == pytest.approx(3 / 5)  # cancelled is not an error
    assert s.timeout_rate == pytest.approx(1 / 5)
    assert s.interrupted_rate == pytest.approx(1 / 5)
    assert s.errors["http_error: HTTP 500"] == 1


def test_throughput_window_is_first_send_to_last_completion():
    a = rec(1000, 1100, [1100, 1200], 1200, out_server=10, prompt_tokens=100)
    b = rec(1500, 1600, [1600, 3000], 3000, out_server=30, prompt_tokens=100)
    warm = rec(0, 5, [5], 5000, warmup=True)  # would stretch the window if counted
    assert window_ns([a, b]) == 2000 * MS
    s = summarize([a, b, warm])
    assert s.window_s == pytest.approx(2.0)
    assert s.request_throughput == pytest.approx(1.0)
    assert s.output_token_throughput == pytest.approx(20.0)
    assert s.total_token_throughput == pytest.approx(120.0)


def test_goodput_counts_requests_meeting_every_slo():
    fast = rec(0, 100, [100, 110, 120], 120)  # ttft 100, tpot 10
    slow_start = rec(0, 600, [600, 610], 610)  # ttft 600
    slow_tokens = rec(0, 100, [100, 200, 300], 300)  # tpot 100
    single = rec(0, 100, [100], 100)  # no TPOT: meets a TPOT SLO vacuously
    slo = Slo(ttft_ms=500, tpot_ms=50)
    assert [meets_slo(r, slo) for r in (fast, slow_start, slow_tokens, single)] == [True, False, False, True]
    s = summarize([fast, slow_start, slow_tokens, single], slo)
    assert s.goodput_ratio == pytest.approx(0.5)
    assert s.goodput == pytest.approx(2 / 0.61)  # window 0..610 ms, 2 good requests


def test_response_time_from_schedule_shows_queueing():
    # scheduled at 0 but sent at 300 (queued): service TTFT 100, response TTFT 400
    r = rec(300, 400, [400, 450], 450, sched=0)
    s = summarize([r])
    assert s.ttft_ms.p50 == 100
    assert s.ttft_from_scheduled_ms.p50 == 400
    assert s.queue_ms.p50 == 300


def test_time_to_first_answer_token_reported_for_reasoning():
    r = rec(0, 50, [50, 60, 70], 70)
    r.reasoning_chunks = 2
    r.first_answer_ns = (BASE + 70) * MS
    s = summarize([r])
    assert s.reasoning and s.ttft_ms.p50 == 50 and s.ttfat_ms.p50 == 70


def test_no_records_gives_zeros_not_errors():
    s = summarize([])
    assert s.counts["sent"] == 0 and s.request_throughput == 0 and s.ttft_ms.n == 0
    assert s.to_dict()["ttft_ms"]["p50"] is None


def test_tpot_ends_at_the_last_token_not_at_the_end_of_the_stream():
    # 20 tokens 10 ms apart from 100 ms; the stream's [DONE] comes 10 ms after the last token.
    tokens = [100 + 10 * k for k in range(20)]
    r = rec(0, 100, tokens, 300)
    assert tpot_ns(r) == pytest.approx(10 * MS)  # (290 - 100) / 19; to the end it would be +5 %
    s = summarize([r])
    assert s.e2e_ms.p50 == 300 and s.tpot_ms.p50 == pytest.approx(10.0)


def test_a_whole_response_has_no_tpot_and_a_tpot_slo_cannot_judge_it():
    # --no-stream: 50 tokens arrive in one chunk at 400 ms; decode took about 8 ms a token.
    whole = [rec(0, 400, [400], 401, out_server=50) for _ in range(3)]
    assert tpot_ns(whole[0]) is None
    s = summarize(whole, Slo(tpot_ms=1.0))
    assert s.goodput is None and s.goodput_ratio is None  # not "100 % met"
    assert s.goodput_unjudged is not None and "3 of 3" in s.goodput_unjudged
    assert "streamed" in s.goodput_unjudged
    only_ttft = summarize(whole, Slo(ttft_ms=500.0))  # a TTFT line is still judged
    assert only_ttft.goodput_ratio == 1.0 and only_ttft.goodput_unjudged is None


def test_a_record_without_chunk_times_times_tpot_to_its_end():
    # A virtual engine keeps no chunk times: its end is its last token.
    r = rec(0, 100, [], 500, out_server=5)
    assert tpot_ns(r) == pytest.approx(100 * MS)
