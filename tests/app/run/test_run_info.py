"""A run too short for the percentiles a gate would judge says so at bench time."""

from __future__ import annotations

from bench_factory import bench_config

from tokenpace.app.run.run_info import too_short_for
from tokenpace.app.run.terms import parse_fail_on


def test_a_run_under_100_requests_is_told_p95_needs_100() -> None:
    line = too_short_for(bench_config("http://127.0.0.1:1/v1", concurrency=1, requests=60), 60)
    assert line is not None and "P95 needs 100" in line and "60 measured" in line


def test_asked_percentiles_are_checked_too_and_enough_says_nothing() -> None:
    asked = bench_config("http://127.0.0.1:1/v1", concurrency=1, requests=200, percentiles=(50.0, 99.0))
    line = too_short_for(asked, 200)
    assert line is not None and "P99 needs 500" in line and "P95" not in line
    assert too_short_for(asked, 500) is None
    assert too_short_for(bench_config("http://127.0.0.1:1/v1", concurrency=1, requests=100), 100) is None


def test_a_fail_on_percentile_is_checked_at_bench_time_and_says_the_gate_stays_undecided() -> None:
    gated = bench_config(
        "http://127.0.0.1:1/v1", concurrency=1, requests=200, fail_on=parse_fail_on("tpot.p99<60ms")
    )
    line = too_short_for(gated, 200)
    assert (
        line is not None and "P99 needs 500" in line and "--fail-on and a check on it stay undecided" in line
    )
    assert too_short_for(gated, 500) is None
