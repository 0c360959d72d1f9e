"""The change between arms that interleave in time, resampled in shared time blocks: a wave of host
stalls that slows both arms at once cancels in the change, so an 8 %-slower-style candidate is
decided where each arm's own dependence-aware interval is wide; equal arms under the same waves are
never breached; arms in different windows keep the independent SE; with independent requests, or
with stalls each arm has alone (nothing to cancel), the 95 % interval still covers a true zero. The
resamples drawn in chunks, a draw a row, are the draw-by-draw estimator's: the weighted percentile
of each row is the one-row interpolation's, and the SEs are the same whatever the chunks' size."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tokenpace.core.analysis.rollout import joint_blocks
from tokenpace.core.analysis.rollout.arms import ROLL_BACK, analyse_arms
from tokenpace.core.analysis.rollout.guards import parse_guards
from tokenpace.core.analysis.rollout.joint_blocks import (
    MIN_SHARED_BLOCKS,
    _Arm,
    _cells,
    _draws,
    joint_ses,
    weighted_quantiles,
)
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


def _one_row(values: np.ndarray, weights: np.ndarray, qs: np.ndarray) -> np.ndarray:
    """The weighted percentile of one row as the draw-by-draw loop took it: its positive-weight
    values, each at the midpoint of its weight in the cumulative share, interpolated."""
    keep = weights > 0
    v, w = values[keep], weights[keep]
    cum = np.cumsum(w)
    out: np.ndarray = np.interp(qs, (cum - w / 2) / cum[-1], v)
    return out


def test_weighted_quantiles_of_each_row_are_the_one_row_interpolation() -> None:
    rng = np.random.default_rng(7)
    qs = np.array([0.0, 0.01, 0.5, 0.95, 0.99, 1.0])
    for _ in range(300):
        n, rows = int(rng.integers(1, 80)), int(rng.integers(1, 12))
        values = np.sort(rng.choice(rng.lognormal(3, 1, size=max(1, n // 3)), size=n))  # ties
        weights = rng.integers(0, 4, size=(rows, n)) * rng.random((rows, n))  # zero weights
        weights[rng.random(rows) < 0.3, : int(rng.integers(0, n + 1))] = 0  # leading zero weights
        weights[rng.random(rows) < 0.3, int(rng.integers(0, n + 1)) :] = 0  # trailing
        weights[rng.random(rows) < 0.1] = 0  # a row with no weight
        if rng.random() < 0.2:
            weights[0] = 0
            weights[0, rng.integers(0, n)] = 1.0  # a single node
        at = rng.permutation(qs)  # in any order
        found = weighted_quantiles(values, weights.copy(), at)
        for r in range(rows):
            if not (weights[r] > 0).any():
                assert np.isnan(found[r]).all()
                continue
            expected = _one_row(values, weights[r], at)
            assert np.allclose(found[r], expected, rtol=1e-12, atol=0), (found[r], expected)


def _one_draw(ref: _Arm, cand: _Arm, reps: np.ndarray, nb: int, qs: np.ndarray) -> np.ndarray | None:
    """log(cand/ref) of one resample as the draw-by-draw loop took it (None: the draw is skipped)."""
    m_ref, m_cand = reps[ref.blocks].astype(np.float64), reps[cand.blocks].astype(np.float64)
    tot_ref = np.bincount(ref.bands, weights=m_ref, minlength=nb)
    tot_cand = np.bincount(cand.bands, weights=m_cand, minlength=nb)
    both = (tot_ref > 0) & (tot_cand > 0)
    if not both.any():
        return None
    shares = np.where(both, tot_ref, 0.0) / float(np.sum(tot_ref[both]))
    w_ref = m_ref * (shares / np.where(both, tot_ref, 1.0))[ref.bands]
    w_cand = m_cand * (shares / np.where(both, tot_cand, 1.0))[cand.bands]
    a, b = _one_row(ref.values, w_ref, qs), _one_row(cand.values, w_cand, qs)
    if not (np.all(a > 0) and np.all(b > 0)):
        return None
    out: np.ndarray = np.log(b / a)
    return out


def _loop_draws(
    ref: _Arm, cand: _Arm, cells: np.ndarray, reps: np.ndarray, qs: np.ndarray, work: np.ndarray
) -> np.ndarray:
    found = [_one_draw(ref, cand, row, cells.shape[1] // 2, qs) for row in reps]
    return np.array([d for d in found if d is not None]).reshape(-1, len(qs))


def _arm(rng: np.random.Generator, n: int, blocks: np.ndarray, bands: np.ndarray) -> _Arm:
    values = np.where(rng.random(n) < 0.1, 0.0, rng.lognormal(3, 0.5, n))  # a tenth zero: p5 may be 0
    order = np.argsort(values, kind="stable")
    return _Arm(values[order], bands[order], blocks[order])


def test_a_chunk_of_draws_is_the_draw_by_draw_loop_skipped_draws_included() -> None:
    rng, k, nb = np.random.default_rng(3), 12, 3
    qs = np.array([0.05, 0.5, 0.95])
    for _ in range(20):
        ref = _arm(rng, 60, rng.integers(0, k, 60), np.where(rng.random(60) < 0.2, 2, rng.integers(0, 2, 60)))
        cand_blocks = rng.integers(0, k - 1, 50)  # the last block holds the reference only
        cand_bands = rng.integers(0, nb, 50)
        cand_blocks[cand_bands == 2] = 0  # the candidate's third band in the first block only
        cand = _arm(rng, 50, cand_blocks, cand_bands)
        picks = rng.integers(0, k, size=(40, 3))  # few blocks a draw: some hold no band of both arms
        reps = np.array([np.bincount(p, minlength=k) for p in picks])
        reps[0] = np.bincount([k - 1], minlength=k)  # the reference's own block alone: skipped
        cells = np.hstack([_cells(ref, k, nb), _cells(cand, k, nb)])
        work = np.full((2, len(reps) * 60), np.nan)  # what it works in holds anything
        found = _draws(ref, cand, cells, reps, qs, work)
        expected = _loop_draws(ref, cand, cells, reps, qs, work)
        assert len(expected) < len(reps)  # draws were skipped
        assert found.shape == expected.shape
        assert np.allclose(found, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
    ("a_ms", "b_ms", "stalled", "jitter"), [(36.9, 39.0, 0.3, 0.01), (36.9, 36.9, 0.0, 0.3)]
)
def test_joint_ses_are_the_draw_by_draw_loops_whatever_the_chunks(
    monkeypatch: pytest.MonkeyPatch, a_ms: float, b_ms: float, stalled: float, jitter: float
) -> None:
    records = gray_release(1, a_ms, b_ms, n=400, stalled=stalled, jitter=jitter)
    match = match_load("a", records["a"], "b", records["b"])
    args = (*match.samples("ttft"), list(match.common), [50.0, 90.0, 99.0])
    found = joint_ses(*args)
    assert set(found) == {50.0, 90.0, 99.0}
    monkeypatch.setattr(joint_blocks, "_draws", _loop_draws)
    loop = joint_ses(*args)
    monkeypatch.undo()
    monkeypatch.setattr(joint_blocks, "CHUNK_ELEMENTS", 1)  # a draw a chunk: the same stream of draws
    one_by_one = joint_ses(*args)
    for q, se in found.items():
        assert math.isclose(se.se_log, loop[q].se_log, rel_tol=1e-9), (q, se, loop[q])
        assert math.isclose(se.se_log, one_by_one[q].se_log, rel_tol=1e-9), (q, se, one_by_one[q])
