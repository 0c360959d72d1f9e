"""A predicted candidate's pure pieces: intervals widened by the fit's error, requests meeting the
lines counted on the sample as a measured run's records are, and the label that marks it."""

from __future__ import annotations

import pytest

from tokenpace.core.analysis.selection.predicted import as_predicted, predicted_label, sample_meeting, widen
from tokenpace.core.analysis.selection.scenarios import Scenario, SloLine
from tokenpace.core.analysis.selection.select import Cell, Placement, Verdict


def _scenario(*lines: SloLine) -> Scenario:
    return Scenario("s", "", 512, 64, 4.0, None, lines)


def test_widen_moves_only_latency_bounds_by_twice_the_fit_error():
    values = {
        "ttft_ms.p95": 100.0,
        "ttft_ms.p95.hi": 120.0,
        "ttft_ms.p95.lo": 90.0,
        "e2e_ms.p90.hi": 50.0,
        "error_rate": 0.5,
        "achieved_rps.hi": 3.0,  # not a latency: untouched
    }
    got = widen(values, 0.1)
    assert got["ttft_ms.p95"] == 100.0  # the prediction itself does not move
    assert got["ttft_ms.p95.hi"] == pytest.approx(120.0 * 1.2)
    assert got["ttft_ms.p95.lo"] == pytest.approx(90.0 / 1.2)
    assert got["e2e_ms.p90.hi"] == pytest.approx(60.0)
    assert got["error_rate"] == 0.5 and got["achieved_rps.hi"] == 3.0
    assert widen(values, 0.0) == values


def test_sample_meeting_counts_every_line_and_treats_missing_values_as_a_record_would():
    sample = {
        "ttft_ms": [100.0, 900.0, 200.0, None, 300.0],
        "tpot_ms": [10.0, 10.0, 80.0, 10.0, None],  # one output token: no TPOT, not a failure
        "e2e_ms": [500.0, 1500.0, 900.0, 400.0, 300.0],
    }
    lines = (SloLine("ttft", "p95", 800.0), SloLine("tpot", "p95", 50.0), SloLine("itl", "p99", 1.0))
    # meets: #0 (all under), #4 (no TPOT); not: #1 TTFT over, #2 TPOT over, #3 no TTFT
    assert sample_meeting(sample, _scenario(*lines)) == (2, 5)
    assert sample_meeting(sample, _scenario(SloLine("e2e", "p95", 1000.0))) == (4, 5)  # only #1 is over


def test_a_ragged_sample_is_refused():
    with pytest.raises(ValueError, match="differ in length"):
        sample_meeting({"ttft_ms": [1.0], "tpot_ms": [], "e2e_ms": [1.0]}, _scenario())


def test_the_label_names_the_profile_and_the_what_if():
    label = predicted_label({"kind": "calibrated profile", "profile": "mine", "replicas": 2})
    assert label == "PREDICTED by the simulator from the calibrated profile mine, 2 replicas"
    assert predicted_label({"profile": "x"}).startswith("PREDICTED")


def test_a_predicted_verdict_says_predicted_where_a_measured_one_says_measured():
    at = Placement(
        True, "step s#2 at 10 req/s, the next load measured above 2 req/s", {}, frozenset(), ("s#2",)
    )
    cell = Cell(
        "TTFT P95 < 800 ms", "unknown", None, None, "not at the scenario's input length: measured at ~16"
    )
    verdict = Verdict("p.json", "sweep", at, (cell,), ("measured at ~16 output tokens",), None)
    got = as_predicted(verdict)
    assert got.kind == "predicted"
    assert "next load predicted above" in got.placement.where
    assert got.cells[0].reason.endswith("predicted at ~16") and got.warnings == (
        "predicted at ~16 output tokens",
    )
    assert "measured" not in repr(got.to_dict())


def test_a_predicted_verdict_carries_its_caveats_and_a_pass_the_profile_cannot_prove_is_undecided():
    at = Placement(True, "step s#1 at 2 req/s", {}, frozenset(), ("s#1",))
    passing = Cell("TTFT P95 < 800 ms", "pass", 500.0, 600.0, "upper bound 600 ms < 800 ms", 800.0)
    failing = Cell("E2E P95 < 900 ms", "fail", 950.0, 990.0, "P95 950 ms is over the line 900 ms", 900.0)
    verdict = Verdict("p.json", "sweep", at, (passing, failing), (), None)
    caveat = "slot limit not identified"
    got = as_predicted(verdict, [caveat])
    assert got.caveats == (caveat,) and got.to_dict()["caveats"] == [caveat]
    assert [c.status for c in got.cells] == ["pass", "fail"]  # a caveat alone moves no cell
    slow = as_predicted(verdict, [caveat], ["the fast speed's predictions only"])
    assert [c.status for c in slow.cells] == ["undecided", "fail"]  # a slower engine only fails more
    assert slow.cells[0].reason.endswith("but the fast speed's predictions only")
