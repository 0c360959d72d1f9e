"""The one exit-code table: undecided has a code of its own, apart from bad input (2)."""

from __future__ import annotations

from tokenpace.core.exit_codes import ExitStatus, verdict_code, worst


def test_undecided_is_not_bad_input_and_every_code_is_distinct() -> None:
    codes = [int(c) for c in ExitStatus]
    assert len(codes) == len(set(codes))
    assert int(ExitStatus.REFUSED) == 2 and int(ExitStatus.UNDECIDED) not in (0, 1, 2, 3, 4)


def test_every_verdict_maps_to_pass_fail_or_undecided() -> None:
    assert {verdict_code(v) for v in ("pass", "holds", "promote")} == {ExitStatus.OK}
    assert {verdict_code(v) for v in ("fail", "fails", "regressed", "roll back")} == {ExitStatus.ABORTED}
    assert {verdict_code(v) for v in ("undecided", "hold")} == {ExitStatus.UNDECIDED}
    assert verdict_code("something new") is ExitStatus.UNDECIDED  # never a pass by default


def test_worst_fail_beats_undecided_beats_pass() -> None:
    ok, fail, und = ExitStatus.OK, ExitStatus.ABORTED, ExitStatus.UNDECIDED
    assert worst([ok, und, fail]) is fail
    assert worst([ok, und]) is und
    assert worst([ok, ok]) is ok and worst([]) is ok
