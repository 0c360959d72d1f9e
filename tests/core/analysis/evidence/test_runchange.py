"""The change between two sides leaves open what a side's effective sample cannot bound: a verdict
only on the side its interval bounds, and no count of runs advised for the open side."""

from __future__ import annotations

import math

import numpy as np
import orjson

from tokenpace.core.analysis.comparison.compare import Comparison, compare_samples
from tokenpace.core.analysis.comparison.gate import evaluate, parse_thresholds
from tokenpace.core.analysis.evidence.runchange import Change, SideLevels, change, open_change
from tokenpace.core.analysis.evidence.runnoise import RunNoise
from tokenpace.core.analysis.evidence.samples import Samples
from tokenpace.core.analysis.evidence.verdict import Verdict, decide_interval
from tokenpace.testing import dependent_series as ds

CH = Change(100.0, 120.0, 0.2, 0.1, 0.3, 0.01, 0.05, math.inf, None, 3)
SHUT = (False, False)


def test_an_open_side_opens_the_change_on_the_side_it_moves() -> None:
    assert open_change(CH, SHUT, SHUT) is CH
    up = open_change(CH, SHUT, (False, True))  # B unbounded above: B/A - 1 too
    assert (up.rel_lo, up.rel_hi, up.runs_needed) == (0.1, math.inf, None)
    assert open_change(CH, (True, False), SHUT).rel_hi == math.inf  # A unbounded below
    down = open_change(CH, (False, True), SHUT)  # A unbounded above: B/A may be anything down to 0
    assert (down.rel_lo, down.rel_hi) == (-1.0, 0.3)
    # a lower bound beyond the threshold still decides; nothing is decided on the open side
    assert decide_interval(up.rel_lo, up.rel_hi, True, False, 0.05) is Verdict.SLOWER
    small = open_change(
        Change(100.0, 101.0, 0.01, -0.02, 0.03, 0.5, 0.02, math.inf, None, 3), SHUT, (False, True)
    )
    assert decide_interval(small.rel_lo, small.rel_hi, True, False, 0.05) is Verdict.UNDECIDED
    assert decide_interval(0.1, 0.3, True, False, 0.05) is Verdict.SLOWER  # (as before where bounded)


def _flat(x: np.ndarray) -> Samples:
    return Samples([np.array([v]) for v in x])


def test_short_runs_that_moved_together_leave_p95_open_and_never_pass_a_gate() -> None:
    rng = np.random.default_rng(41)
    a, b = ds.ar1(rng, 2, 200, 0.9)  # the same server twice: about 10 effective requests at P95
    result = compare_samples("ttft", [_flat(a)], [_flat(b)], percentiles=(50.0, 95.0), resamples=200)
    row = next(r for r in result.rows if r.percentile == "p95")
    assert row.rel_ci is not None and row.rel_ci[1] == math.inf and row.rel_ci[0] == -1.0
    assert row.verdict in (Verdict.UNDECIDED, Verdict.TOO_FEW)
    comparison = Comparison(0.05, 0.05, [result])
    # as compare --json writes it: the open side null, no Infinity token (orjson.loads refuses one)
    doc = orjson.loads(orjson.dumps(comparison.to_dict(), option=orjson.OPT_SERIALIZE_NUMPY))
    rows = doc["metrics"][0]["percentiles"]
    assert next(r for r in rows if r["percentile"] == "p95")["rel_ci"] == [-1.0, None]
    (item,) = evaluate(comparison, parse_thresholds("ttft.p95=50%"))
    assert item.outcome == "undecided" and "bound the interval" in item.reason
    # two long independent runs stay bounded, as before
    c, d = 100 * rng.lognormal(0, 0.5, (2, 1000))
    steady = compare_samples("ttft", [_flat(c)], [_flat(d)], percentiles=(95.0,), resamples=200)
    lo, hi = steady.rows[0].rel_ci or (None, None)
    assert lo is not None and hi is not None and math.isfinite(hi) and lo > -1


def test_a_side_opens_from_its_dependence_never_from_its_count_alone() -> None:
    def side(counts: list[int], n_effs: list[float]) -> SideLevels:
        col = np.array([[v] for v in n_effs])
        return SideLevels(col, col, counts, col)

    # runs of 64 requests bound no P95 even if independent: the side stays as before (closed)
    assert side([64], [64.0]).open_sides(0, 95.0, 0.05) == SHUT
    assert side([64], [20.0]).open_sides(0, 95.0, 0.05) == SHUT
    # 200 requests worth 20 (two runs together 400 worth 40): dependence leaves P95 open above
    assert side([200], [20.0]).open_sides(0, 95.0, 0.05) == (False, True)
    assert side([200, 200], [20.0, 20.0]).open_sides(0, 95.0, 0.05) == (False, True)
    # worth more than half their count: not material, closed
    assert side([130], [70.0]).open_sides(0, 95.0, 0.05) == SHUT


def test_the_runs_advised_are_never_fewer_than_the_runs_that_left_it_undecided() -> None:
    # five runs a side, +7 % [~+1 %, ~+13 %] against a 5 % gate: the far end lies 8 % past the line,
    # which three runs centred there would clear, but five runs already left it holding the line
    a = np.array([100.0, 101.0, 99.0, 100.5, 99.5])
    noise = RunNoise("ttft.p95", 0.055, math.inf, 3, 15, point_sd=0.055)
    ch = change(a, np.zeros(5), a * 1.07, np.zeros(5), noise, 0.05, 0.05, False, one_sided=True)
    assert ch.rel_lo is not None and ch.rel_hi is not None and ch.rel_lo < 0.05 < ch.rel_hi
    assert ch.runs == 5 and ch.runs_needed is not None and ch.runs_needed > 5
    one = change(a[:1], np.zeros(1), a[:1] * 1.07, np.zeros(1), noise, 0.05, 0.05, False, one_sided=True)
    assert one.runs == 1 and one.runs_needed is not None and one.runs_needed >= 2
