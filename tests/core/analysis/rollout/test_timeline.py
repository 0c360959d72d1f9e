"""A gray release over time: per arm and bucket its share, load, percentiles, error and event
rates, computed by hand; sparse buckets draw no percentile; changes are markers."""

from __future__ import annotations

import pytest

from tokenpace.core.analysis.rollout.timeline import MAX_BUCKETS, MIN_BUCKET_N, arms_timeline, bucket_seconds
from tokenpace.core.events import ConfigChange, OutcomeEvent
from tokenpace.core.record import RequestRecord, Status

MS = 1_000_000
T0 = 1_700_000_000.0  # a multiple of 10 s: buckets start on it


def rec(i: int, ttft_ms: float, inflight: int | None = None, status: Status = Status.OK) -> RequestRecord:
    return RequestRecord(
        f"r{i}", sent_ns=MS, first_token_ns=MS + int(ttft_ms * MS) if status is Status.OK else None,
        end_ns=MS + int(2 * ttft_ms * MS), status=status, upstream_inflight=inflight,
    )  # fmt: skip


def test_share_load_latency_and_errors_per_arm_and_bucket() -> None:
    # bucket 0: a has 6 requests at 100 ms (1 error), b has 2; bucket 1: b alone, 6 at 300 ms
    a = [(T0 + 1 + i, rec(i, 100.0, inflight=4)) for i in range(5)]
    a.append((T0 + 7, rec(5, 0, inflight=2, status=Status.TIMEOUT)))
    b = [(T0 + 2, rec(10, 200.0)), (T0 + 3, rec(11, 200.0))]
    b += [(T0 + 10 + i, rec(20 + i, 300.0, inflight=1)) for i in range(6)]
    tl = arms_timeline({"a": a, "b": b}, [], [], T0, T0 + 20, buckets=2)
    assert tl["bucket_s"] == 10.0 and tl["t"] == [T0, T0 + 10]
    arm_a, arm_b = tl["arms"]["a"], tl["arms"]["b"]
    assert arm_a["requests"] == [6, 0] and arm_b["requests"] == [2, 6]
    assert arm_a["share"] == [pytest.approx(6 / 8), 0.0] and arm_b["share"] == [pytest.approx(2 / 8), 1.0]
    assert arm_a["inflight_mean"] == [pytest.approx((5 * 4 + 2) / 6), None]
    assert arm_b["inflight_mean"] == [None, 1.0]  # no load recorded by an older gateway: None
    assert arm_a["ttft_p50"] == [100.0, None] and arm_a["e2e_p95"] == [200.0, None]
    assert arm_a["error_rate"] == [pytest.approx(1 / 6), None]
    assert arm_b["ttft_p95"] == [None, 300.0]  # 2 requests in bucket 0: below MIN_BUCKET_N, not drawn
    assert MIN_BUCKET_N > 2


def test_events_per_request_and_changes_as_markers() -> None:
    a = [(T0 + i, rec(i, 50.0)) for i in range(10)]
    events = [OutcomeEvent("complaint", "a", T0 + 1), OutcomeEvent("complaint", "a", T0 + 2)]
    events.append(OutcomeEvent("complaint", "unknown", T0 + 3))  # no known arm: not any arm's
    split = lambda w: {"split": [{"arm": "a", "weight": w}, {"arm": "b", "weight": 100 - w}]}  # noqa: E731
    change = ConfigChange("s", 1, T0 + 5, "arms --apply", ("weights",), split(90), split(75))
    before = ConfigChange("s", 0, T0 - 50, "start", (), split(100), split(90))  # outside the window
    tl = arms_timeline({"a": a}, events, [before, change], T0, T0 + 10, buckets=1)
    assert tl["arms"]["a"]["events"] == {"complaint": [pytest.approx(2 / 10)]}
    assert tl["changes"] == [
        {"unix_s": T0 + 5, "session": "s", "epoch": 1, "who": "arms --apply", "changed": ["weights"],
         "split_before": {"a": 90.0, "b": 10.0}, "split_after": {"a": 75.0, "b": 25.0}}
    ]  # fmt: skip


def test_an_event_naming_its_request_counts_in_that_requests_bucket() -> None:
    # a: 6 requests in bucket 0, none in bucket 1; complaints about two of them come in bucket 1
    a = [(T0 + 1 + i, rec(i, 50.0)) for i in range(6)]
    late = [OutcomeEvent("complaint", "a", T0 + 15, request_id=f"r{i}") for i in (0, 3)]
    late.append(OutcomeEvent("complaint", "a", T0 + 16, request_id="not-stored"))  # its own time
    tl = arms_timeline({"a": a}, late, [], T0, T0 + 20, buckets=2)
    assert tl["arms"]["a"]["requests"] == [6, 0]
    assert tl["arms"]["a"]["events"] == {"complaint": [pytest.approx(2 / 6), None]}


def test_buckets_are_round_and_bounded() -> None:
    assert bucket_seconds(60) == 1.0 and bucket_seconds(600) == 5.0 and bucket_seconds(7 * 86400) == 7200.0
    a = [(T0 + i * 3600, rec(i, 50.0)) for i in range(24 * 30)]  # a month, an hour apart
    tl = arms_timeline({"a": a}, [], [], T0, T0 + 30 * 86400)
    assert len(tl["t"]) <= MAX_BUCKETS and sum(tl["arms"]["a"]["requests"]) == len(a)


def test_the_window_starts_at_the_first_request_not_days_before() -> None:
    a = [(T0 + 7 * 86400 - 100 + i, rec(i, 50.0)) for i in range(10)]
    tl = arms_timeline({"a": a}, [], [], T0, T0 + 7 * 86400)
    assert tl["bucket_s"] == 1.0 and tl["start_unix"] >= T0 + 7 * 86400 - 101
