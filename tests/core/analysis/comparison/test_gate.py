"""The release gate's advice counts judged runs: where runs were left out (NOT VALID), it plans for
the same share lost."""

from __future__ import annotations

from tokenpace.core.analysis.comparison.gate import LeftOut


def test_the_runs_to_measure_grow_with_the_share_left_out() -> None:
    assert LeftOut(4, 0).planned(2) == 2 and LeftOut(4, 0).note(2) == ""
    assert LeftOut(4, 2).planned(2) == 4 and LeftOut(3, 1).planned(2) == 3
    assert LeftOut(4, 2).note(3) == (
        "; 2 of the 4 runs measured were left out (NOT VALID or interrupted), so measure about 6 for 3 "
        "to be judged"
    )
    assert LeftOut(2, 2).planned(3) == 3  # nothing judged: no share to plan by
