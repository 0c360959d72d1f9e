"""The change between arms that interleave in time, resampled in shared time blocks: a wave of host
stalls that slows both arms at once cancels in the change, so an 8 %-slower-style candidate is
decided where each arm's own dependence-aware interval is wide; equal arms under the same waves are
never breached; arms in different windows keep the independent SE; with independent requests, or
with stalls each arm has alone (nothing to cancel), the 95 % interval still covers a true zero."""

from __future__ import annotations

import math

import numpy as np

from tokenpace.core.analysis.rollout.arms import ROLL_BACK, analyse_arms
from tokenpace.core.analysis.rollout.guards import parse_guards
from tokenpace.core.analysis.rollout.joint_blocks import MIN_SHARED_BLOCKS, joint_ses
from tokenpace.core.analysis.rollout.load_match import MATCHED, match_load, matched_change
from tokenpace.core.record import RequestRecord

MS = 1_000_000
GUARD = parse_guards("ttft.p50=+3%")


def gray_release(
    seed: int,
    a_ms: float,
    b_ms: float,
    n: int = 200,
    stalled: float = 0.3,
    jitter: float = 0.01,
    apart: bool = False,
) -> dict[str, list[RequestRecord]]:
    """Requests alternating between arms a and b every 50 ms (concurrency 1); ``stalled`` of the
    time blocks of 10 requests run 4x slower on both arms (a busy host); ``jitter``: per-request
    lognormal noise. ``apart``: arm b's requests sent after all of a's (different windows)."""
    rng = np.random.default_rng(seed)
    waves = rng.permutation(-(-n // 10)) < round(stalled * -(-n // 10))  # that share, exactly
    out: dict[str, list[RequestRecord]] = {"a": [], "b": []}
    for i in range(n):
        arm = "ab"[i % 2]
        ttft = (a_ms if arm == "a" else b_ms) * (4.0 if waves[i // 10] else 1.0) * rng.lognormal(0, jitter)
        sent = ((i // 2 + (n if apart and arm == "b" else 0)) * 2 + i % 2 + 1) * 50 * MS
        r = RequestRecord(f"{arm}{i}", labels={"arm": arm, "upstream": arm}, sent_ns=sent)
        r.first_token_ns = r.first_answer_ns = sent + int(ttft * MS)
        r.token_ns = [r.first_token_ns + k * 10 * MS for k in range(4)]
        r.output_tokens_counted, r.end_ns = 4, r.token_ns[-1]
        r.upstream_inflight = 0
        out[arm].append(r)
    return out


def _report(records: dict[str, list[RequestRecord]], seed: int):  # type: ignore[no-untyped-def]
    return analyse_arms(records, [], {"a": 1.0, "b": 1.0}, GUARD, resamples=100, seed=seed)


def test_a_shared_wave_of_stalls_cancels_and_a_57_percent_slowdown_is_rolled_back() -> None:
    joint, independent = 0, 0
    for seed in range(10):
        report = _report(gray_release(seed, 36.9, 39.0), seed)
        joint += report.verdict == ROLL_BACK
        row = report.diffs[0].latency.metric("ttft").row("p50")
        assert row is not None and row.change is not None
        lo = math.expm1(math.log1p(row.change.rel) - 1.96 * row.change.se_log)
        independent += lo > 0.03  # each arm's own interval, added in quadrature: what it replaces
    assert joint >= 9 and independent <= 4, (joint, independent)


def test_equal_arms_under_the_same_waves_are_never_breached() -> None:
    for seed in range(50):
        report = _report(gray_release(seed, 36.9, 36.9, jitter=0.05), seed)
        assert [g.outcome for g in report.guards] != ["breached"], seed


def test_arms_in_different_windows_keep_the_independent_se() -> None:
    records = gray_release(0, 36.9, 39.0, apart=True)
    match = match_load("a", records["a"], "b", records["b"])
    assert match.state == MATCHED
    assert joint_ses(*match.samples("ttft"), list(match.common), [50.0]) == {}
    interleaved = gray_release(0, 36.9, 39.0)
    shared = match_load("a", interleaved["a"], "b", interleaved["b"])
    found = joint_ses(*shared.samples("ttft"), list(shared.common), [50.0])
    assert found and found[50.0].blocks >= MIN_SHARED_BLOCKS
    report = _report(records, 0)
    assert "time blocks both arms share" not in report.diffs[0].latency.method
    assert "time blocks both arms share" in _report(interleaved, 0).diffs[0].latency.method


def test_independent_requests_a_true_zero_is_covered() -> None:
    covered, joined = 0, 0
    for seed in range(200):
        records = gray_release(seed, 36.9, 36.9, stalled=0.0, jitter=0.3)
        match = match_load("a", records["a"], "b", records["b"])
        mc = matched_change(match, "ttft", 50)
        assert mc is not None
        found = joint_ses(*match.samples("ttft"), list(match.common), [50.0], seed).get(50.0)
        se = found.floored(mc.se_log) if found is not None else mc.se_log
        joined += found is not None
        covered += abs(math.log1p(mc.rel)) <= 1.96 * se
    assert joined >= 190 and covered >= 0.93 * 200, (joined, covered)


def test_waves_each_arm_has_alone_do_not_cancel_and_a_true_zero_is_covered() -> None:
    covered, joined = 0, 0
    for seed in range(100):  # the same times, each arm's own stalls: nothing common to cancel
        records = {
            "a": gray_release(seed, 36.9, 36.9, n=400, jitter=0.1)["a"],
            "b": gray_release(seed + 10_000, 36.9, 36.9, n=400, jitter=0.1)["b"],
        }
        match = match_load("a", records["a"], "b", records["b"])
        mc = matched_change(match, "ttft", 50)
        assert mc is not None
        found = joint_ses(*match.samples("ttft"), list(match.common), [50.0], seed).get(50.0)
        if found is not None:
            joined += 1
            covered += abs(math.log1p(mc.rel)) <= 1.96 * found.floored(mc.se_log)
    assert joined >= 90 and covered >= 0.93 * joined, (joined, covered)
