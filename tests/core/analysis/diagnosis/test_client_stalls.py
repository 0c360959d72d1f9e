"""A client stall counts against a request only where one of its timestamps fell into it; the run
stands unless the stalls could move a headline percentile out of its interval or held too many."""

from __future__ import annotations

from tokenpace.core.analysis.diagnosis.client_stalls import (
    HOLD_SLACK_NS,
    MIN_HELD_NS,
    Stalls,
    request_holds,
    stall_impact,
)
from tokenpace.core.record import RequestRecord, Status

MS = 1_000_000
T0 = 1000.0  # the clock's reading at the first send (ms); 0 would read as never sent


def _request(
    i: int, sent_ms: float, ttft_ms: float = 50, tokens: int = 10, itl_ms: float = 10
) -> RequestRecord:
    sent = int((T0 + sent_ms) * MS)
    first = sent + int(ttft_ms * MS)
    r = RequestRecord(request_id=f"r{i}", index=i, sent_ns=sent, request_ns=sent + MS // 10, status=Status.OK)
    r.token_ns = [first + k * int(itl_ms * MS) for k in range(tokens)]
    r.first_token_ns = r.token_ns[0]
    r.output_tokens_counted = tokens
    r.end_ns = r.token_ns[-1] + MS
    return r


def _first(r: RequestRecord) -> int:
    assert r.first_token_ns is not None
    return r.first_token_ns


def _stalls(*spans_ms: tuple[float, float]) -> dict[int, Stalls]:
    return {0: Stalls([int((T0 + a) * MS) for a, _ in spans_ms], [int((T0 + b) * MS) for _, b in spans_ms])}


def test_a_stall_holds_the_timestamps_taken_in_it_by_the_time_since_it_began() -> None:
    r = _request(0, sent_ms=0)  # first token at 50 ms, last at 140, end at 141
    (hold,) = request_holds(_stalls((30, 55)), [r])  # the first token came in during it
    assert hold.first_ns == 20 * MS and hold.ttft_ns == 20 * MS
    assert hold.end_ns == 0 and hold.e2e_ns == 0  # the end was stamped on time
    assert hold.added_ns == 20 * MS


def test_a_stall_mid_stream_that_no_timestamp_fell_into_moves_nothing() -> None:
    r = _request(0, sent_ms=0)
    (hold,) = request_holds(_stalls((60, 75)), [r])  # between the first token and the end
    assert hold.added_ns == 0


def test_a_timestamp_just_after_the_stall_may_be_from_its_backlog() -> None:
    r = _request(0, sent_ms=0)
    end = r.end_ns or 0
    (inside,) = request_holds({0: Stalls([end - 10 * MS], [end - HOLD_SLACK_NS + 1])}, [r])
    (after,) = request_holds({0: Stalls([end - 10 * MS], [end - HOLD_SLACK_NS - 1])}, [r])
    assert inside.e2e_ns == 10 * MS and after.e2e_ns == 0


def test_a_late_write_delays_the_whole_answer_once_per_stall() -> None:
    r = _request(0, sent_ms=0)
    (hold,) = request_holds(_stalls((0.05, 0.2), (139, 142)), [r])  # the write, then the end
    assert hold.write_ns == 50_000  # never before the send (0.1 ms): from the stall's start
    assert hold.e2e_ns == hold.end_ns + hold.write_ns  # two stalls add up
    assert hold.ttft_ns == hold.write_ns


def test_stalls_of_one_worker_never_hold_another_workers_requests() -> None:
    mine, other = _request(0, 0), _request(1, 0)
    other.worker = 1
    holds = request_holds(_stalls((30, 55)), [mine, other])
    assert holds[0].added_ns > 0 and holds[1].added_ns == 0


def _run(n: int = 200) -> list[RequestRecord]:
    # one request a second, TTFTs spread over 40..79 ms, TPOTs over 10..14 ms
    return [_request(i, i * 1000.0, ttft_ms=40 + (i * 7) % 40, itl_ms=10 + (i * 3) % 5) for i in range(n)]


def test_a_few_held_requests_that_move_nothing_leave_the_run_valid() -> None:
    run = _run()
    stalls = [(_first(r) - 5 * MS, _first(r) + MS) for r in run[10:14]]  # 4 of 200
    impact, holds = stall_impact({0: Stalls([a for a, _ in stalls], [b for _, b in stalls])}, run)
    assert impact.held == 4 and impact.requests == 200 and impact.share == 0.02
    assert not impact.moved and not impact.reasons
    assert abs(impact.most_added_ms - 5) < 1e-9 and abs(impact.longest_stall_ms - 6) < 1e-9
    assert sum(1 for h in holds if h.added_ns) == 4
    assert "4 of 200 requests" in impact.verdict()


def test_stalls_that_held_too_many_requests_make_it_not_valid_and_say_why() -> None:
    run = _run()
    stalls = [(_first(r) - 5 * MS, _first(r) + MS) for r in run[:30]]  # 15 %
    impact, _ = stall_impact({0: Stalls([a for a, _ in stalls], [b for _, b in stalls])}, run)
    assert impact.share == 0.15
    (reason, *_) = impact.reasons
    assert "30 of 200 requests" in reason and "--stall-tolerance" in reason
    loose, _ = stall_impact({0: Stalls([a for a, _ in stalls], [b for _, b in stalls])}, run, tolerance=0.2)
    assert not any("tolerated" in r for r in loose.reasons)  # the flag sets the share tolerated


def test_a_long_stall_on_the_tail_moves_a_percentile_out_of_its_interval() -> None:
    # 8 of 600 (under the tolerance) held 400 ms each: they are the whole tail, so taking the stall
    # off moves the TTFT P99 below its own interval
    run = [_request(i, i * 1000.0, ttft_ms=40 + i * 0.2) for i in range(600)]
    for r in run[:8]:
        r.first_token_ns = (r.first_token_ns or 0) + 400 * MS
        r.token_ns = [t + 400 * MS for t in r.token_ns]
        r.end_ns = (r.end_ns or 0) + 400 * MS
    stalls = [(_first(r) - 400 * MS, _first(r) + MS) for r in run[:8]]
    impact, _ = stall_impact({0: Stalls([a for a, _ in stalls], [b for _, b in stalls])}, run)
    assert impact.share == 8 / 600
    assert any(m.startswith("TTFT P99") for m in impact.moved)
    assert any("out of its 95 % interval" in r for r in impact.reasons)


def test_no_stalls_and_stalls_not_kept() -> None:
    impact, holds = stall_impact({}, _run(20))
    assert impact.held == 0 and not impact.reasons and all(h.added_ns == 0 for h in holds)
    assert impact.verdict().startswith("no request")
    lost, _ = stall_impact({}, _run(20), stalls_dropped=3)
    assert "3 stalls not placed" in lost.reasons[0]


def test_warm_up_and_requests_never_sent_are_not_counted() -> None:
    run = _run(20)
    run[0].warmup = True
    run[1].sent_ns = 0
    impact, _ = stall_impact({}, run)
    assert impact.requests == 18


def test_a_request_sent_after_a_stall_ended_is_not_held_by_its_backlog() -> None:
    r = _request(0, sent_ms=0)  # sent at 0, written 0.1 ms later
    (hold,) = request_holds(_stalls((-20, -1)), [r])  # ended 1 ms before the send: within the slack
    assert hold.added_ns == 0


def test_a_move_under_one_percent_is_no_move_even_past_a_degenerate_interval() -> None:
    # every TPOT is 10 ms (an interval of [10, 10]); 0.5 ms off 8 first tokens lifts TPOT P99 by 0.6 %
    run = [_request(i, i * 1000.0) for i in range(600)]
    stalls = [(_first(r) - MS // 2, _first(r) + MS) for r in run[-8:]]
    impact, holds = stall_impact({0: Stalls([a for a, _ in stalls], [b for _, b in stalls])}, run)
    assert sum(1 for h in holds if h.added_ns) == 8 and not impact.moved
    bigger = [(_first(r) - 5 * MS, _first(r) + MS) for r in run[-8:]]  # 5.6 %: moved
    moved, _ = stall_impact({0: Stalls([a for a, _ in bigger], [b for _, b in bigger])}, run)
    assert [m.split(" from")[0] for m in moved.moved] == ["TPOT P99"]


def test_a_percentile_on_too_few_requests_is_no_figure_to_move() -> None:
    # 20 requests: P95 and P99 rest on too few samples (reported so), so a stall on the tail that
    # would move them moves no figure; the same stall on 600 requests moves the P99
    run = [_request(i, i * 1000.0, ttft_ms=40 + i * 0.2) for i in range(20)]
    r = run[-1]
    r.first_token_ns = (r.first_token_ns or 0) + 400 * MS
    r.token_ns = [t + 400 * MS for t in r.token_ns]
    r.end_ns = (r.end_ns or 0) + 400 * MS
    stall = Stalls([_first(r) - 400 * MS], [_first(r) + MS])
    impact, _ = stall_impact({0: stall}, run)
    assert impact.held == 1 and not impact.moved


def test_a_hold_within_the_monitors_own_precision_is_not_counted_toward_the_share() -> None:
    # 30 of 200 held (15 %): by 2.5 ms each, under the lateness the monitor does not call a stall, the
    # run stands (the records still carry their holds); by 3.5 ms each, it is NOT VALID
    run = _run()
    for held_ms, valid in ((2.5, True), (3.5, False)):
        stalls = [(_first(r) - int(held_ms * MS), _first(r) + MS) for r in run[:30]]
        impact, holds = stall_impact({0: Stalls([a for a, _ in stalls], [b for _, b in stalls])}, run)
        assert sum(1 for h in holds if h.added_ns) == 30
        assert impact.held == (0 if valid else 30) and (not impact.reasons) == valid, impact.reasons
        assert (held_ms * MS > MIN_HELD_NS) != valid
    assert "each by over 3 ms" in impact.reasons[0]
