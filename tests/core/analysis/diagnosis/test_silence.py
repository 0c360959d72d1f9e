"""A stall is reported whatever share of the run's gaps it makes; a slow server is not a stall."""

from __future__ import annotations

from tokenpace.core.analysis.diagnosis.silence import silence_summary, silences
from tokenpace.core.record import RequestRecord, Status

MS = 1_000_000


def _request(i: int, sent_ms: float, ttft_ms: float, gaps_ms: list[float]) -> RequestRecord:
    r = RequestRecord(request_id=f"r{i}", index=i, sent_ns=int(sent_ms * MS), status=Status.OK)
    t = sent_ms + ttft_ms
    tokens = [t]
    for g in gaps_ms:
        t += g
        tokens.append(t)
    r.token_ns = [int(x * MS) for x in tokens]
    r.first_token_ns = r.first_answer_ns = r.token_ns[0]
    r.end_ns = r.token_ns[-1] + MS
    return r


def _closed_loop(users: int, requests: int, ttft_ms: float, gaps_ms: list[float]) -> list[RequestRecord]:
    """Each user sends its next request when its last ends."""
    free = [0.0] * users
    out = []
    for i in range(requests):
        u = i % users
        r = _request(i, free[u], ttft_ms, gaps_ms)
        free[u] = r.end_ns / MS  # type: ignore[operator]
        out.append(r)
    return out


def test_a_freeze_mid_stream_is_reported_though_its_gaps_are_a_whole_percent_of_all_gaps() -> None:
    # 120 requests of 4 tokens at 4 users: 360 gaps between tokens, 4 of them the 2 s freeze (1.1 %),
    # enough to lift a per-gap P99; the run must still report the freeze
    run = _closed_loop(4, 120, 10, [2, 2, 2])
    frozen = {40, 41, 42, 43}  # four requests, all in flight: their third gap is the 2 s freeze
    shift = 2000.0
    first_frozen = min(run[i].sent_ns for i in frozen)
    for r in run:
        if r.index in frozen:
            r.token_ns[2:] = [t + int(shift * MS) for t in r.token_ns[2:]]
            r.end_ns = r.token_ns[-1] + MS
        elif r.sent_ns > first_frozen:
            r.sent_ns += int(shift * MS)
            r.token_ns = [t + int(shift * MS) for t in r.token_ns]
            r.first_token_ns = r.first_answer_ns = r.token_ns[0]
            r.end_ns = r.end_ns + int(shift * MS)  # type: ignore[operator]
    found, threshold = silences(run)
    assert threshold < 2.0
    assert found and 1.9 <= found[0].length_s <= 2.01
    doc, warnings = silence_summary(run)
    assert doc["longest"] and warnings and "the server sent nothing for 2.0 s" in warnings[0]


def test_a_server_whose_first_tokens_always_take_seconds_is_slow_not_stalled() -> None:
    run = _closed_loop(1, 20, 3000, [20, 20, 20])  # one user, 3 s to every first token
    found, threshold = silences(run)
    assert threshold >= 9.0 and found == []


def test_no_records_no_silence() -> None:
    assert silences([]) == ([], 1.0)
