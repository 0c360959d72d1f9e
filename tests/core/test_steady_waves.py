"""The steady rate of a closed loop on an engine that finishes requests in waves: Little's law holds
by construction (L = X x W, L never above the users), whatever the waves' phase. Hand-made records."""

from __future__ import annotations

import pytest

from tokenpace.core.record import RequestRecord, Status
from tokenpace.core.steady import steady_state

MS = 1_000_000


def waves(users: int, latencies_ms: list[float]) -> list[RequestRecord]:
    """``users`` users start together; wave k's requests all take ``latencies_ms[k]``; each user sends
    its next request the moment its last one ends (the waves of a batch engine)."""
    out, t = [], 1000.0
    for k, w in enumerate(latencies_ms):
        for u in range(users):
            r = RequestRecord(request_id=f"{k}-{u}", worker=u, sent_ns=int(t * MS), scheduled_ns=int(t * MS))
            r.status = Status.OK
            r.end_ns = int((t + w) * MS)
            r.first_token_ns = r.end_ns
            r.output_tokens_counted = 1
            out.append(r)
        t += w
    return out


def test_fast_waves_between_the_window_ends_do_not_inflate_the_rate():
    # 8 users, waves of 3.4, 3.4, 1.3, 1.3, 1.3, 3.4 s (the GPU engine's shape). The window runs from
    # the first wave's end to the last send (the last wave's start): its completions are waves 2-5,
    # three fast ones, 32 in 7.3 s = 4.4 req/s; every wave sent at full load (2-6) averages 2.14 s,
    # so 4.4 req/s would keep 9.4 requests in flight for 8 users.
    lat = [3400, 3400, 1300, 1300, 1300, 3400]
    s = steady_state(waves(8, lat), 8)
    counted = s.completions / s.window_s
    assert counted * s.mean_latency_s > 1.1 * 8  # what the count claimed: more in flight than users
    assert s.in_flight == pytest.approx(8, rel=1e-6)  # measured: every user always had one in flight
    assert s.request_throughput * s.mean_latency_s == pytest.approx(8, rel=1e-6)
    # the requests in flight in the window: waves 2-6, mean 2.14 s: 8 / 2.14 = 3.74 req/s
    assert s.request_throughput == pytest.approx(8 / (sum(lat[1:]) / 5 / 1000), rel=1e-6)


def test_an_even_engine_gets_the_same_rate_either_way():
    s = steady_state(waves(4, [500.0] * 20), 4)
    assert s.request_throughput == pytest.approx(8.0) == pytest.approx(s.completions / s.window_s)
    assert not s.short and s.estimator == "in_flight/latency"


def test_a_user_that_never_sent_shows_as_fewer_in_flight_not_a_higher_rate():
    # 4 users asked; one user's requests never happened (a connection cap): 3 in flight, not 4
    recs = [r for r in waves(4, [500.0] * 20) if r.worker != 3]
    s = steady_state(recs, 3)
    assert s.in_flight == pytest.approx(3)
    assert s.request_throughput == pytest.approx(6.0)
