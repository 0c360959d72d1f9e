"""The ladder of a gray release and the move each verdict asks for."""

from __future__ import annotations

import pytest

from tokenpace.core.analysis.rollout.ladder import at_share, next_move, parse_ladder, share_of

LADDER = (1.0, 5.0, 25.0, 50.0, 100.0)


def test_parse_ladder_and_its_refusals() -> None:
    assert parse_ladder("1%,5%, 25%,50%,100%") == LADDER
    for bad, why in (
        ("5%,1%,100%", "rise"),
        ("1%,50%", "last step"),
        ("0%,100%", "between"),
        ("x", "percentage"),
    ):
        with pytest.raises(ValueError, match=why):
            parse_ladder(bad)


def test_promote_climbs_one_rung_roll_back_drops_the_candidate_hold_moves_nothing() -> None:
    start = {"a": 99.0, "b": 1.0}
    up = next_move("promote", start, "b", LADDER)
    assert up.moves and up.after == {"a": 95.0, "b": 5.0} and "1 % -> 5 %" in up.reason
    assert next_move("promote", {"a": 75.0, "b": 25.0}, "b", LADDER).after == {"a": 50.0, "b": 50.0}
    assert next_move("promote", {"a": 50.0, "b": 50.0}, "b", LADDER).after == {"a": 0.0, "b": 100.0}
    top = next_move("promote", {"a": 0.0, "b": 100.0}, "b", LADDER)
    assert not top.moves and "top" in top.reason
    back = next_move("roll back", {"a": 50.0, "b": 50.0}, "b", LADDER)
    assert back.after == {"a": 100.0, "b": 0.0}
    assert not next_move("roll back", back.after, "b", LADDER).moves
    hold = next_move("hold", start, "b", LADDER)
    assert not hold.moves and hold.after == start
    with pytest.raises(ValueError, match="not in the gateway's split"):
        next_move("promote", start, "c", LADDER)


def test_a_share_keeps_the_other_arms_in_proportion() -> None:
    weights = at_share({"a": 60.0, "b": 10.0, "c": 30.0}, "b", 50.0)
    assert weights == {"a": 33.333333, "b": 50.0, "c": 16.666667}
    assert share_of(weights, "b") == pytest.approx(50.0)
    assert at_share({"a": 0.0, "b": 100.0}, "b", 50.0) == {"a": 50.0, "b": 50.0}  # a back from 0


def test_a_baseline_arm_moves_with_the_canary_and_production_takes_the_rest() -> None:
    start = {"prod": 98.0, "baseline": 1.0, "canary": 1.0}
    up = next_move("promote", start, "canary", LADDER, baseline="baseline")
    assert up.after == {"prod": 90.0, "baseline": 5.0, "canary": 5.0}
    half = next_move(
        "promote", {"prod": 50.0, "baseline": 25.0, "canary": 25.0}, "canary", LADDER, "baseline"
    )
    assert half.after == {"prod": 0.0, "baseline": 50.0, "canary": 50.0}  # at most half each
    top = next_move("promote", half.after, "canary", LADDER, "baseline")
    assert top.after == {"prod": 0.0, "baseline": 0.0, "canary": 100.0}
    back = next_move("roll back", half.after, "canary", LADDER, "baseline")
    assert back.after == {"prod": 100.0, "baseline": 0.0, "canary": 0.0}  # production takes it all back
    assert at_share({"baseline": 1.0, "canary": 1.0}, "canary", 0.0, "baseline") == {
        "baseline": 100.0,
        "canary": 0.0,
    }
    with pytest.raises(ValueError, match="'base' is not in the gateway's split"):
        next_move("promote", start, "canary", LADDER, "base")
