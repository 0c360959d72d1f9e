"""A validation's verdicts come from intervals, never points: met only inside the tolerance, missed only
wholly beyond it, undecided otherwise with the reason; and the fit-quality gate."""

from __future__ import annotations

import pytest

from tokenpace.core.analysis.calibration.verdicts import (
    FAILS,
    HOLDS,
    MET,
    MISSED,
    UNDECIDED,
    combine,
    fit_problems,
    judge_row,
    profile_verdict,
)


def test_met_only_when_the_whole_error_interval_is_inside_the_tolerance() -> None:
    v = judge_row((98.0, 102.0), (99.0, 101.0), enough=True, tolerance=0.10)
    assert v.verdict == MET and v.low_error >= -0.10 and v.high_error <= 0.10


def test_a_point_within_the_tolerance_is_not_met_when_its_interval_is_wide() -> None:
    # predicted 100 vs measured 100, but the prediction could be anywhere in 16-154: no evidence
    v = judge_row((16.0, 154.0), (99.0, 101.0), enough=True, tolerance=0.10)
    assert v.verdict == UNDECIDED and "wider than the tolerance" in v.reason


def test_missed_only_when_the_whole_interval_lies_beyond_the_tolerance() -> None:
    assert judge_row((140.0, 160.0), (99.0, 101.0), True).verdict == MISSED
    assert judge_row((40.0, 60.0), (99.0, 101.0), True).verdict == MISSED
    straddles = judge_row((105.0, 120.0), (99.0, 101.0), True)
    assert straddles.verdict == UNDECIDED and "straddles" in straddles.reason


def test_the_measured_percentiles_own_interval_counts() -> None:
    # the prediction is tight, but the measured P95 is only known to 80-130: not met, not missed
    v = judge_row((99.0, 101.0), (80.0, 130.0), True, tolerance=0.10)
    assert v.verdict == UNDECIDED
    assert v.low_error == pytest.approx(99 / 130 - 1) and v.high_error == pytest.approx(101 / 80 - 1)


def test_too_few_requests_and_loads_past_the_profile_are_undecided_with_the_reason() -> None:
    few = judge_row((140.0, 160.0), (99.0, 101.0), enough=False)
    assert few.verdict == UNDECIDED and "too few requests" in few.reason
    past = judge_row((140.0, 160.0), (99.0, 101.0), True, beyond="128 in flight, the calibration saw 64")
    assert past.verdict == UNDECIDED and "128 in flight" in past.reason


def test_a_miss_within_the_engines_own_move_is_undecided() -> None:
    # 30-40 % off, the engine itself moved 25 % or more: not a confident miss
    moved = judge_row((130.0, 140.0), (99.0, 101.0), True, tolerance=0.10, engine_moved=0.25)
    assert moved.verdict == UNDECIDED and "moved" in moved.reason
    # 60 % off is beyond the tolerance plus the move: missed
    assert judge_row((160.0, 170.0), (99.0, 101.0), True, 0.10, engine_moved=0.25).verdict == MISSED


def test_loads_and_profiles_combine_their_rows() -> None:
    assert combine([MET, MET]) == MET
    assert combine([MET, UNDECIDED]) == UNDECIDED
    assert combine([UNDECIDED, MISSED, MET]) == MISSED
    assert profile_verdict([MET, MET]) == HOLDS
    assert profile_verdict([MET, MISSED]) == FAILS
    assert profile_verdict([MET, UNDECIDED]) == UNDECIDED
    assert profile_verdict([]) == UNDECIDED  # nothing judged decides nothing


def test_the_fit_quality_gate() -> None:
    assert fit_problems({"decode_rel_rms": 0.17, "prefill_rel_rms": 0.05}, prefill_table=False) == []
    bad = fit_problems({"decode_rel_rms": 0.42, "prefill_rel_rms": 0.05}, prefill_table=False)
    assert len(bad) == 1 and "42%" in bad[0]
    # a misfitting prefill line replaced by the measured table is not the model's error
    assert fit_problems({"decode_rel_rms": 0.1, "prefill_rel_rms": 0.4}, prefill_table=True) == []
    assert fit_problems({"decode_rel_rms": 0.1, "prefill_rel_rms": 0.4}, prefill_table=False)
