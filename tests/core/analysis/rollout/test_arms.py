"""Gray-release analysis on hand-made records: shares and their intervals, the sample-ratio check,
events joined to arms, guard rails and the one verdict."""

from __future__ import annotations

import math

import pytest

from tokenpace.core.analysis.evidence.rates import share, share_diff, wilson
from tokenpace.core.analysis.rollout.arms import (
    HOLD,
    LATENCY,
    PROMOTE,
    ROLL_BACK,
    analyse_arms,
    guarded_metrics,
    resolve_events,
)
from tokenpace.core.analysis.rollout.guards import parse_guards
from tokenpace.core.analysis.rollout.srm import chi2_sf, srm_check
from tokenpace.core.events import UNKNOWN_ARM, OutcomeEvent
from tokenpace.core.record import RequestRecord, Status

MS = 1_000_000


def rec(rid: str, arm: str, user: str, ttft_ms: float, status: Status = Status.OK) -> RequestRecord:
    r = RequestRecord(request_id=rid, sent_ns=10_000 * MS, status=status, labels={"arm": arm, "user": user})
    r.first_token_ns = r.first_answer_ns = r.sent_ns + int(ttft_ms * MS)
    r.token_ns = [r.first_token_ns + i * 10 * MS for i in range(5)]
    r.output_tokens_counted = 5
    r.end_ns = r.token_ns[-1]
    return r


def arm_records(arm: str, users: int, per_user: int, ttft_ms: float, failures: int = 0) -> list:
    out = []
    for u in range(users):
        for k in range(per_user):
            i = u * per_user + k
            status = Status.HTTP_ERROR if i < failures else Status.OK
            out.append(rec(f"{arm}-{i}", arm, f"{arm}u{u}", ttft_ms + (i % 10), status))
    return out


def test_chi_square_tail_matches_the_tables() -> None:
    assert chi2_sf(3.841, 1) == pytest.approx(0.05, abs=1e-4)
    assert chi2_sf(5.991, 2) == pytest.approx(0.05, abs=1e-4)
    assert chi2_sf(11.070, 5) == pytest.approx(0.05, abs=1e-4)
    assert chi2_sf(10.828, 1) == pytest.approx(0.001, abs=1e-5)
    assert chi2_sf(0.0, 3) == 1.0


def test_srm_flags_a_skewed_split_only() -> None:
    fine = srm_check({"a": 905, "b": 95}, {"a": 9, "b": 1}, "users")
    assert fine is not None and not fine.flagged and fine.expected == {"a": 900.0, "b": 100.0}
    skewed = srm_check({"a": 500, "b": 500}, {"a": 9, "b": 1}, "users")
    assert skewed is not None and skewed.flagged and skewed.p_value < 1e-10
    none_expected = srm_check({"a": 10, "b": 1}, {"a": 1, "b": 0}, "requests")
    assert none_expected is not None and none_expected.flagged and math.isinf(none_expected.chi2)
    assert srm_check({"a": 0, "b": 0}, {"a": 1, "b": 1}, "users") is None


def test_wilson_and_newcombe_intervals() -> None:
    interval = wilson(0, 50)
    assert interval is not None
    lo, hi = interval
    assert lo == 0.0 and 0.05 < hi < 0.08  # not the empty interval of the normal approximation
    interval = wilson(10, 100)
    assert interval is not None
    lo, hi = interval
    assert lo == pytest.approx(0.0552, abs=1e-3) and hi == pytest.approx(0.1744, abs=1e-3)
    d = share_diff(share(10, 100), share(30, 100))
    assert d.diff == pytest.approx(0.20) and d.ci is not None and 0.08 < d.ci[0] < d.ci[1] < 0.32


def test_guards_parse_and_refuse_with_one_line() -> None:
    guards = parse_guards("ttft.p95=+10%,error_rate=+0.5pp,complaint=+0pp,task_completed=-2pp")
    assert (
        ",".join(g.text for g in guards)
        == "ttft.p95=+10%,error_rate=+0.5pp,complaint=+0pp,task_completed=-2pp"
    )
    assert guards[3].higher_is_worse is False and guards[1].limit == pytest.approx(0.005)
    for bad in ("ttft.p95=+10pp", "error_rate=+1%", "ttft=+5%", "x", "ttft.p100=+1%", ""):
        with pytest.raises(ValueError):
            parse_guards(bad)


def test_events_join_through_stored_requests_and_unknown_ones_are_counted() -> None:
    records = {"a": [rec("r1", "a", "u1", 10)], "b": [rec("r2", "b", "u2", 10)]}
    events = [
        OutcomeEvent("accepted", UNKNOWN_ARM, 1.0, request_id="r2"),  # another worker's request
        OutcomeEvent("accepted", UNKNOWN_ARM, 1.0, request_id="nope"),
        OutcomeEvent("complaint", "a", 1.0, user="u1"),
    ]
    joined, unmatched = resolve_events(records, events)
    assert unmatched == 1
    assert [(e.event, e.arm, e.user) for e in joined] == [("accepted", "b", "u2"), ("complaint", "a", "u1")]


def _complaints(arm: str, users: int, every: int) -> list[OutcomeEvent]:
    return [OutcomeEvent("complaint", arm, 1.0, user=f"{arm}u{u}") for u in range(0, users, every)]


def test_a_slower_arm_with_more_complaints_is_rolled_back() -> None:
    records = {"a": arm_records("a", 200, 2, 20), "b": arm_records("b", 200, 2, 60)}
    events = _complaints("a", 200, 50) + _complaints("b", 200, 4)
    report = analyse_arms(
        records, events, {"a": 1, "b": 1}, parse_guards("ttft.p95=+10%,complaint=+0pp"), resamples=200
    )
    assert not report.split_broken and report.verdict == ROLL_BACK and report.exit_code == 1
    by_guard = {i.guard.name: i for i in report.guards}
    assert by_guard["ttft.p95"].outcome == "breached" and by_guard["complaint"].outcome == "breached"
    a, b = report.arms
    assert (a.requests, a.users, b.users) == (400, 200, 200)
    assert a.events["complaint"].per_user.k == 4 and b.events["complaint"].per_user.k == 50
    assert report.diffs[0].events["complaint"][1].diff == pytest.approx(0.25 - 0.02)


def test_comparing_only_the_guarded_metrics_gives_the_whole_reports_verdict_and_rows() -> None:
    records = {"a": arm_records("a", 100, 2, 20), "b": arm_records("b", 100, 2, 23)}
    guards = parse_guards("e2e.p95=+10%,ttft.p90=+10%,error_rate=+5pp")
    assert (
        guarded_metrics(guards) == ("ttft", "e2e") and guarded_metrics(parse_guards("error_rate=+1pp")) == ()
    )
    whole = analyse_arms(records, [], {"a": 1, "b": 1}, guards, resamples=200, seed=3)
    lean = analyse_arms(records, [], {"a": 1, "b": 1}, guards, resamples=200, seed=3, metrics=("ttft", "e2e"))
    assert [m.metric for m in whole.diffs[0].latency.metrics] == list(LATENCY)
    assert [m.metric for m in lean.diffs[0].latency.metrics] == ["ttft", "e2e"]
    assert list(lean.arms[0].latency) == ["ttft", "e2e"] and list(whole.arms[0].latency) == list(LATENCY)
    assert (lean.verdict, lean.reason) == (whole.verdict, whole.reason)
    assert [g.to_dict() for g in lean.guards] == [g.to_dict() for g in whole.guards]
    for m in ("ttft", "e2e"):  # each metric drawn with its own seed: the same intervals
        assert lean.diffs[0].latency.metric(m).to_dict() == whole.diffs[0].latency.metric(m).to_dict()
    bare = analyse_arms(records, [], {"a": 1, "b": 1}, parse_guards("error_rate=+5pp"), metrics=())
    assert bare.diffs[0].latency.metrics == [] and bare.guards[0].outcome == whole.guards[2].outcome


def test_an_equal_arm_is_promoted_and_a_broken_split_holds_everything() -> None:
    guards = parse_guards("ttft.p95=+20%,error_rate=+5pp")
    same = {"a": arm_records("a", 100, 2, 20), "b": arm_records("b", 100, 2, 20)}
    report = analyse_arms(same, [], {"a": 1, "b": 1}, guards, resamples=200)
    assert report.verdict == PROMOTE and report.exit_code == 0, report.reason
    skewed = analyse_arms(same, [], {"a": 99, "b": 1}, guards, resamples=200)
    assert skewed.split_broken and skewed.verdict == HOLD and skewed.exit_code == 5
    assert "sample ratio mismatch" in skewed.reason


def test_too_little_traffic_holds_and_a_missing_reference_is_bad_input() -> None:
    few = {"a": arm_records("a", 3, 1, 20), "b": arm_records("b", 3, 1, 20)}
    report = analyse_arms(few, [], {"a": 1, "b": 1}, parse_guards("ttft.p99=+10%"), resamples=100)
    assert report.verdict == HOLD and report.guards[0].outcome == "undecided"
    with pytest.raises(ValueError, match="no arm 'c'"):
        analyse_arms(few, [], {"a": 1, "b": 1}, reference="c")


def test_an_error_rate_guard_passes_only_when_its_whole_interval_is_within_the_limit() -> None:
    # the issue: PROMOTE with an error-rate interval of [-5.2, +4.1] pp against +0.5 pp allowed.
    # Identical arms, 2 failures in 40 requests each: the estimate is 0, the interval about +-10 pp
    same = {"a": arm_records("a", 40, 1, 20, failures=2), "b": arm_records("b", 40, 1, 20, failures=2)}
    report = analyse_arms(same, [], {"a": 1, "b": 1}, parse_guards("error_rate=+0.5pp"), resamples=100)
    item = report.guards[0]
    assert item.change == 0.0 and item.ci is not None and item.ci[1] is not None and item.ci[1] > 0.005
    assert item.outcome == "undecided" and report.verdict == HOLD and report.exit_code == 5
    assert "straddles +0.50pp" in item.reason and "requests per arm would decide it" in item.reason


def test_a_guard_on_an_event_nobody_reported_is_refused_with_the_known_names() -> None:
    records = {"a": arm_records("a", 50, 1, 20), "b": arm_records("b", 50, 1, 20)}
    events = _complaints("a", 50, 2)
    with pytest.raises(ValueError, match=r"no event 'complaints' was reported \(known events: complaint\)"):
        analyse_arms(records, events, {"a": 1, "b": 1}, parse_guards("complaints=+0pp"), resamples=50)


def test_one_heavy_user_does_not_flag_a_correct_split() -> None:
    # a correct router: 100 users on each arm; one user of b sends 400 requests, the rest 2 each.
    # Requests counted as independent would call it a mismatch; the split is judged on users.
    a = arm_records("a", 100, 2, 20)
    b = arm_records("b", 99, 2, 20) + [rec(f"heavy-{i}", "b", "heavy", 20) for i in range(400)]
    report = analyse_arms({"a": a, "b": b}, [], {"a": 1, "b": 1}, parse_guards("ttft.p95=+50%"), resamples=50)
    by_unit = {r.unit: r for r in report.srm}
    assert by_unit["requests"].p_value < 1e-10 and not by_unit["requests"].flagged
    assert not by_unit["users"].flagged and not report.split_broken
    assert "sample ratio" not in report.reason


def test_the_latency_table_calls_slower_only_beyond_compares_practical_threshold() -> None:
    # b is 3 % slower in TTFT, measured so well its interval excludes zero: compare's rule (5 %)
    # calls that negligible, not slower; 10 % slower is slower.
    a = arm_records("a", 200, 2, 100)
    for b_ms, want in ((103.0, "negligible"), (110.0, "slower")):
        b = arm_records("b", 200, 2, b_ms)
        report = analyse_arms({"a": a, "b": b}, [], {"a": 1, "b": 1}, resamples=200)
        latency = report.diffs[0].latency
        assert latency.min_effect == pytest.approx(0.05)
        assert latency.metric("ttft").verdict.value == want
