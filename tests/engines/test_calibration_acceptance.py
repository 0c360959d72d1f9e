"""The acceptance's verdict per target: a miss is decided only on the prediction's interval, widened
by the engine's own change between two runs of one load; otherwise it is undecided."""

from __future__ import annotations

from engines.calibration_acceptance import Acceptance
from tokenpace.sim.virtual_time.replay import Prediction


def _row(predicted: float, low: float, high: float, metric: str = "ttft") -> Prediction:
    return Prediction("c=8 in=64", metric, 50, predicted, low, high, measured_ms=100.0)


def test_a_miss_is_decided_only_when_the_whole_interval_is_beyond_the_target_and_the_engines_change() -> None:
    rows = [
        _row(70.0, 60.0, 80.0),  # -30 %, interval -40..-20 %: beyond 10 % + 5 %
        _row(80.0, 60.0, 95.0, "tpot"),  # -20 %, but the interval reaches -5 %: undecided
        _row(95.0, 90.0, 99.0, "e2e"),  # -5 %: no miss at all
    ]
    acc = Acceptance(60.0, 2, rows, {("ttft", 50): 0.05, ("tpot", 50): 0.0})
    assert [m[1] for m in acc.misses] == ["ttft", "tpot"]
    assert acc.decided_misses == [("c=8 in=64", "ttft", 50, "-30.0%")]
    # The engine itself moved 25 % between two runs of the load: the same -30 % is no longer decided.
    moved = Acceptance(60.0, 2, rows, {("ttft", 50): -0.25})
    assert moved.decided_misses == []
