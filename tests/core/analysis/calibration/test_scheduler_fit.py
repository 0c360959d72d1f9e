"""Which scheduler behaviour a sweep supports (scheduler_fit, prefill_gaps) and whether the engine held
still within a load (engine_drift.within_load_drift), on records made here from known engines."""

from __future__ import annotations

import pytest

from tokenpace.core.analysis.calibration.engine_drift import within_load_drift
from tokenpace.core.analysis.calibration.engine_obs import DecodeObs, MeasuredLoad
from tokenpace.core.analysis.calibration.prefill_gaps import MIXED, PREFILL_FIRST, prefill_gaps
from tokenpace.core.analysis.calibration.scheduler_fit import (
    FLOOR,
    LINE,
    Law,
    LoadPoint,
    fit_floor,
    identify_step_law,
    load_points,
)
from tokenpace.core.analysis.calibration.verdicts import UNDECIDED, judge_row
from tokenpace.core.record import RequestRecord

MS = 1_000_000


def _obs(law: Law, batches: tuple[float, ...], noise: float = 0.0) -> list[DecodeObs]:
    """Five requests' decode observations per load, one load per batch, steps from `law`."""
    out = []
    for b in batches:
        for k in range(5):
            wobble = 1 + noise * (k - 2) / 2
            out.append(DecodeObs(f"c={b:g}", b, 256 * b, law.step(b) * wobble, 256))
    return out


def test_a_flat_then_rising_engine_is_told_a_floor() -> None:
    truth = Law(FLOOR, 0.022, 0.0, 0.0015)  # 22 ms until ~15 users, then 1.5 ms a user
    got = identify_step_law(_obs(truth, (1, 2, 4, 8, 16, 32, 64, 128)))
    assert got.decided and got.chosen == FLOOR
    assert got.law.floor == pytest.approx(0.022, rel=0.05)
    assert got.held_out[FLOOR] < got.held_out[LINE]
    assert "step law: floor" in got.note and "at least 22" in got.note


def test_a_line_engine_keeps_the_line() -> None:
    """A floor nests a line (a floor at the smallest batch, the line past it), so on a line engine it
    is never decided for: the line, vLLM's default, is kept with its slope."""
    truth = Law(LINE, 0.0, 0.008, 0.0002)  # vLLM-like: every sequence adds to the step
    got = identify_step_law(_obs(truth, (1, 4, 16, 64, 128)))
    assert got.chosen == LINE and got.law.floor == 0.0
    assert got.law.per_seq == pytest.approx(0.0002, rel=0.01)


def test_too_few_batch_sizes_is_undecided_and_says_what_would_decide() -> None:
    got = identify_step_law(_obs(Law(FLOOR, 0.02, 0.0, 0.001), (1, 4)))
    assert not got.decided and got.chosen == LINE
    assert "three concurrencies" in got.note


def test_close_candidates_are_undecided_and_a_separating_load_is_named() -> None:
    # flat data: the line's slope ~0 predicts as well as the floor; no load tells them apart yet
    got = identify_step_law(_obs(Law(FLOOR, 0.02, 0.0, 0.0), (1, 4, 16), noise=0.1))
    assert not got.decided and got.chosen == LINE
    assert "would tell them apart" in got.note and "decoding at once" in got.note


def test_loads_where_the_engine_moved_are_left_out() -> None:
    obs = _obs(Law(FLOOR, 0.022, 0.0, 0.0), (1, 4, 16, 32))
    obs += _obs(Law(LINE, 0.0, 0.1, 0.0), (64,))  # a load measured in another state of the engine
    assert {p.load for p in load_points(obs, ["c=64"])} == {"c=1", "c=4", "c=16", "c=32"}
    assert "1 load(s) where the engine moved left out" in identify_step_law(obs, ["c=64"]).note


def test_a_floor_needs_its_rising_loads_clearly_above_its_spread() -> None:
    """A load a little above the floor, within three times the floor loads' spread, is on it."""
    points = [LoadPoint("a", 1, 0.020, 5), LoadPoint("b", 1, 0.022, 5), LoadPoint("c", 4, 0.021, 5)]
    assert fit_floor([*points, LoadPoint("d", 16, 0.023, 5)]).per_seq == 0.0  # +9.5 %: noise
    assert fit_floor([*points, LoadPoint("d", 16, 0.030, 5)]).per_seq > 0.0  # +43 %: past the kink


def _closed_loop(
    users: int, waves: int, step_ms: list[float], prefill_ms: float, first: bool
) -> MeasuredLoad:
    """`users` requests a wave, started one step apart (staggered), 12 tokens each; each step of the
    engine lasts step_ms[wave]; under prefill-first, a newcomer's prefill adds prefill_ms to the gap
    of every request decoding across it."""
    recs = []
    i = 0
    for w in range(waves):
        t0 = w * 1000 * MS
        for u in range(users):
            sent = t0 + u * round(step_ms[w] * MS)
            tokens = [sent + round((prefill_ms + 1) * MS)]
            for _ in range(11):
                tokens.append(tokens[-1] + round(step_ms[w] * MS))
            recs.append(
                RequestRecord(
                    request_id=str(i), index=i, sent_ns=sent, first_token_ns=tokens[0], end_ns=tokens[-1],
                    token_ns=tokens, output_tokens_server=12, prompt_tokens=256,
                )
            )  # fmt: skip
            i += 1
    if first:  # every gap spanning another's first token grows by the prefill step
        firsts = sorted(r.first_token_ns or 0 for r in recs)
        for r in recs:
            shift, out = 0, [r.token_ns[0]]
            for a, b in zip(r.token_ns[:-1], r.token_ns[1:], strict=True):
                if any(a < f <= b for f in firsts):
                    shift += round(prefill_ms * MS)
                out.append(b + shift)
            r.token_ns, r.end_ns = out, out[-1]
    return MeasuredLoad(label=f"c={users}", records=tuple(recs), concurrency=users)


def test_prefill_first_is_read_from_the_gaps_a_newcomer_spans() -> None:
    load = _closed_loop(6, 10, [20.0] * 10, prefill_ms=30.0, first=True)
    got = prefill_gaps([load], {load.label: (0.030, 0.010)})
    assert got.decided and got.chosen == PREFILL_FIRST


def test_mixed_steps_are_read_from_gaps_that_do_not_grow() -> None:
    load = _closed_loop(6, 10, [20.0] * 10, prefill_ms=30.0, first=False)
    got = prefill_gaps([load], {load.label: (0.030, 0.010)})
    assert got.decided and got.chosen == MIXED


def test_no_concurrent_load_leaves_prefill_first_untested() -> None:
    load = _closed_loop(1, 10, [20.0] * 10, prefill_ms=30.0, first=False)
    got = prefill_gaps([load], {load.label: (0.030, 0.010)})
    assert not got.decided and "not tested" in got.note


def test_an_engine_that_slowed_within_a_load_is_named_with_its_size() -> None:
    moving = _closed_loop(4, 20, [20.0] * 10 + [60.0] * 10, prefill_ms=5.0, first=False)
    d = within_load_drift(moving)
    assert d.moved and d.change == pytest.approx(2.0, rel=0.05) and d.low >= 0.2
    still = _closed_loop(4, 20, [20.0] * 20, prefill_ms=5.0, first=False)
    assert not within_load_drift(still).moved


def test_a_load_that_moved_is_undecided_whatever_the_prediction() -> None:
    v = judge_row((100, 101), (100, 101), True, 0.1, moved_within="engine moved +200% within this load")
    assert v.verdict == UNDECIDED and "moved" in v.reason
