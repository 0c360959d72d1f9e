"""compare: rank test, bootstrap intervals of percentile differences, verdicts, the release gate."""

from __future__ import annotations

import math

import numpy as np
import pytest
from baseline_fixtures import make_record

from tokenpace.core.analysis.comparison.compare import compare_records, compare_samples
from tokenpace.core.analysis.comparison.gate import evaluate, parse_thresholds
from tokenpace.core.analysis.evidence.bootstrap import percentile_differences
from tokenpace.core.analysis.evidence.ranktest import mann_whitney, rankdata
from tokenpace.core.analysis.evidence.runnoise import GroupNoise, noise_key
from tokenpace.core.analysis.evidence.samples import METRICS, Samples, metric_samples
from tokenpace.core.analysis.evidence.verdict import Verdict
from tokenpace.core.record import Status
from tokenpace.testing import dependent_series as ds


def test_rankdata_averages_ties() -> None:
    assert rankdata(np.array([10.0, 20, 20, 5])).tolist() == [2, 3.5, 3.5, 1]


def test_mann_whitney_matches_hand_computation() -> None:
    # B's ranks 4+5+6 = 15, U = 9, mean 4.5, var 3*3/12*7 = 5.25, z = (4.5-0.5)/sqrt(5.25)
    t = mann_whitney(np.array([1.0, 2, 3]), np.array([4.0, 5, 6]))
    assert t is not None and t.u == 9
    assert t.p_value == pytest.approx(math.erfc(4 / math.sqrt(5.25) / math.sqrt(2)))
    assert t.prob_b_greater == 1.0


def test_mann_whitney_tie_correction() -> None:
    # ranks: 1 -> 1, three 2s -> 3, two 3s -> 5.5; U = 3+5.5+5.5-6 = 8; var = 9/12*(7-30/30) = 4.5
    t = mann_whitney(np.array([1.0, 2, 2]), np.array([2.0, 3, 3]))
    assert t is not None and t.u == 8
    assert t.z == pytest.approx(3 / math.sqrt(4.5))
    assert t.p_value == pytest.approx(math.erfc(1.0))


def test_mann_whitney_all_equal_is_no_evidence() -> None:
    t = mann_whitney(np.ones(5), np.ones(7))
    assert t is not None and t.p_value == 1.0


def _flat(values) -> Samples:
    return Samples([np.array([v]) for v in values])


def test_bootstrap_interval_covers_a_real_shift_and_zero_when_none() -> None:
    rng = np.random.default_rng(3)
    a = rng.normal(100, 10, 400)
    shifted = percentile_differences(_flat(a), _flat(a + 20), [50, 95], seed=1)
    assert 15 < shifted[50].lo < 20 < shifted[50].hi < 25
    assert shifted[50].rel == pytest.approx(0.2, rel=0.05)
    assert shifted[50].p_value < 0.01
    same = percentile_differences(_flat(a), _flat(rng.normal(100, 10, 400)), [50, 95], seed=1)
    assert same[50].lo < 0 < same[50].hi and same[95].lo < 0 < same[95].hi
    # seeded: the same call gives the same interval
    assert percentile_differences(_flat(a), _flat(a + 20), [50], seed=1)[50] == shifted[50]


def _run(ttfts, itl=10.0, tokens=8):
    return [make_record(i, t, itl, tokens) for i, t in enumerate(ttfts)]


def _quiet() -> list[GroupNoise]:
    """Learned from 30 repeated runs that barely moved: the intervals are the requests' noise."""
    return [
        GroupNoise(noise_key(m, q), 30, 1e-6, 0.01, 1.0) for m in METRICS for q in (50.0, 90.0, 95.0, 99.0)
    ]


def test_compare_finds_b_slower_and_refuses_tails_it_cannot_see() -> None:
    rng = np.random.default_rng(7)
    a = _run(50 * rng.lognormal(0, 0.2, 200))
    b = _run(60 * rng.lognormal(0, 0.2, 200))
    c = compare_records(a, b, learned=_quiet())
    ttft = c.metric("ttft")
    assert ttft.verdict is Verdict.SLOWER and ttft.rank_p is not None and ttft.rank_p < 1e-6
    assert ttft.row("p50").verdict is Verdict.SLOWER  # type: ignore[union-attr]
    assert ttft.row("p95").verdict is Verdict.SLOWER  # type: ignore[union-attr]
    assert ttft.row("p99").verdict is Verdict.TOO_FEW  # type: ignore[union-attr]  # 200 samples: 2 beyond P99
    assert c.metric("tpot").verdict is Verdict.NEGLIGIBLE  # same decode speed: within +-5 %
    assert "whole interval lies beyond 5%" in c.rule and "P99 500" in c.rule and not c.assumed_noise


def test_without_learned_run_noise_only_large_changes_are_decided() -> None:
    rng = np.random.default_rng(7)
    a = _run(50 * rng.lognormal(0, 0.2, 200))
    b = _run(60 * rng.lognormal(0, 0.2, 200))
    c = compare_records(a, b)
    p95 = c.metric("ttft").row("p95")
    assert p95 is not None and p95.noise is not None and p95.noise.assumed and p95.noise.rel_sd == 0.10
    assert p95.verdict is Verdict.UNDECIDED  # +20 %, but two runs of an unknown noise cannot show it
    assert p95.detectable is not None and p95.detectable > 0.3 and "ttft.p95" in c.assumed_noise


def test_faster_and_higher_is_better_throughput() -> None:
    rng = np.random.default_rng(8)
    a = _run(50 * rng.lognormal(0, 0.1, 150), itl=12.0)
    b = _run(50 * rng.lognormal(0, 0.1, 150), itl=10.0)
    c = compare_records(a, b, learned=_quiet())
    assert c.metric("tpot").row("p50").verdict is Verdict.FASTER  # type: ignore[union-attr]
    thr = c.metric("throughput")
    assert thr.row("p50").diff > 0 and thr.row("p50").verdict is Verdict.FASTER  # type: ignore[union-attr,operator]


def test_small_changes_are_negligible_not_slower() -> None:
    base = 50 * np.random.default_rng(9).lognormal(0, 0.01, 300)
    for factor in (1.003, 1.004, 1.02):  # +0.4 % was once called "slower": the rule read ">= 0 %"
        c = compare_records(_run(base), _run(base * factor), learned=_quiet())
        assert c.metric("ttft").row("p50").verdict is Verdict.NEGLIGIBLE  # type: ignore[union-attr]


def test_failed_and_warmup_requests_are_not_latency_samples() -> None:
    recs = [*_run([50.0] * 20), make_record(99, 0, status=Status.TIMEOUT), make_record(98, 5, warmup=True)]
    assert metric_samples(recs, "ttft").n == 20


def test_itl_rank_test_counts_requests_not_gaps() -> None:
    rng = np.random.default_rng(11)
    a = [make_record(i, 50, itl, 100) for i, itl in enumerate(rng.normal(10, 1, 40))]
    b = [make_record(i, 50, itl, 100) for i, itl in enumerate(rng.normal(10, 1, 40))]
    naive = mann_whitney(metric_samples(a, "itl").values, metric_samples(b, "itl").values)
    itl = compare_records(a, b, metrics=["itl"]).metric("itl")
    assert naive is not None and naive.p_value < 0.01  # 3960 correlated gaps a side look "significant"
    assert itl.rank_p is not None and itl.rank_p > 0.05  # 40 requests a side: they are not


def test_gate_thresholds_parse_and_reject_bad_input() -> None:
    t = parse_thresholds("ttft.p95=5%, e2e.p99=10%")
    assert [(x.name, x.limit) for x in t] == [("ttft.p95", 0.05), ("e2e.p99", 0.10)]
    for bad in ("ttft=5%", "ttft.p95=5", "foo.p95=5%", "ttft.p100=5%", ""):
        with pytest.raises(ValueError):
            parse_thresholds(bad)


def test_gate_regresses_only_when_the_interval_clears_the_threshold() -> None:
    rng = np.random.default_rng(12)
    a = _run(100 * rng.lognormal(0, 0.1, 300))
    b = _run(110 * rng.lognormal(0, 0.1, 300))
    c = compare_records(a, b, percentiles=[50, 95, 99], min_effect=0, learned=_quiet())
    items = {
        i.threshold.name: i for i in evaluate(c, parse_thresholds("ttft.p50=5%,ttft.p95=20%,e2e.p99=5%"))
    }
    assert items["ttft.p50"].outcome == "regressed"  # ~10 % worse, all of the interval above 5 %
    assert items["ttft.p95"].outcome == "pass" and items["ttft.p95"].significant  # all within 20 %
    assert items["e2e.p99"].outcome == "undecided"  # 300 samples cannot show a P99
    assert items["ttft.p50"].detectable is not None and 0.05 < items["ttft.p50"].detectable < 0.10
    noisy = compare_records(
        _run(100 * rng.lognormal(0, 0.5, 40)), _run(108 * rng.lognormal(0, 0.5, 40)), learned=_quiet()
    )
    item = evaluate(noisy, parse_thresholds("ttft.p50=5%"))[0]
    assert item.outcome == "undecided" and "holds the 5% allowed" in item.reason  # maybe, not shown


def test_runs_whose_users_move_together_are_compared_by_user() -> None:
    # 20 users a run, each with its own speed: a run is worth about 20 users, not 400 requests.
    rng = np.random.default_rng(31)
    sides = []
    for factor in (1.0, 1.1):
        x, who = ds.per_user(rng, 1, 400, users=20)
        recs = _run(factor * x[0])
        for r, u in zip(recs, who[0], strict=True):
            r.labels["user"] = f"u{u}"
        sides.append(recs)
    keyed = compare_records(sides[0], sides[1], learned=_quiet(), metrics=["ttft"])
    for r in (r for s in sides for r in s):
        del r.labels["user"]
    plain = compare_records(sides[0], sides[1], learned=_quiet(), metrics=["ttft"])
    row, flat = keyed.metric("ttft").row("p50"), plain.metric("ttft").row("p50")
    assert row is not None and flat is not None and row.rel_ci and flat.rel_ci
    assert row.resampled_by_a == row.resampled_by_b == "user" and flat.resampled_by_a == "requests"
    assert row.n_eff_a is not None and row.n_eff_a < 400 / 5 and flat.n_eff_a == 400
    width = row.rel_ci[1] - row.rel_ci[0]  # type: ignore[operator]
    assert width > 2 * (flat.rel_ci[1] - flat.rel_ci[0])  # type: ignore[operator]
    assert keyed.to_dict()["metrics"][0]["resampled_by_b"] == "user"


def test_a_slowdown_on_near_constant_latencies_keeps_its_narrow_interval() -> None:
    # A simulator's TTFT: one level within 0.3 % that drifts through the run, a slow share; B 5.8 %
    # slower (judged against 3 %, as the playbook's guard), each a run of its own. The median's
    # indicator moves together over each whole run, yet the level barely moves: the interval stays
    # the level's (no floor reaching the outliers) and the verdict is decided.
    rng = np.random.default_rng(41)
    a = ds.near_constant(rng, 1, 98)[0]
    b = ds.near_constant(rng, 1, 102, level=36.9 * 1.058)[0]
    c = compare_records(_run(a), _run(b), min_effect=0.03, metrics=["ttft"], learned=_quiet())
    row = c.metric("ttft").row("p50")
    assert row is not None and row.rel_ci is not None and row.n_eff_a is not None and row.n_eff_a < 5
    lo, hi = row.rel_ci
    assert lo is not None and hi is not None and lo > 0.04 and hi < 0.08, row.rel_ci
    assert row.verdict is Verdict.SLOWER and row.dependence_note is None


def test_a_difference_beyond_the_runs_own_drift_is_decided_whatever_the_dependence_window() -> None:
    # Side A's TTFT climbs 15 % through its run (its window never closes: not identified). B is 13x
    # slower: no drift of A's carries that across the threshold, so it is decided. B 30 % slower on
    # the same climb is not: twice the halves' drifts reach the threshold.
    rng = np.random.default_rng(42)
    climb = 5.5 * (1 + 0.15 * np.arange(120) / 120) * (1 + 0.02 * rng.standard_normal(120))
    far = 13 * 5.5 * (1 + 0.003 * rng.standard_normal(120))
    near = 1.3 * 5.5 * (1 + 0.15 * np.arange(120) / 120) * (1 + 0.02 * rng.standard_normal(120))
    decided = compare_records(_run(climb), _run(far), metrics=["ttft"], learned=_quiet()).metric("ttft")
    assert decided.verdict is Verdict.SLOWER
    p50 = decided.row("p50")
    assert p50 is not None and p50.dependence_note is None and p50.n_eff_a is not None and p50.n_eff_a < 5
    held = (
        compare_records(_run(climb), _run(near), metrics=["ttft"], learned=_quiet()).metric("ttft").row("p50")
    )
    # one effective request a side bounds neither side of the change: shown open, not decided
    assert held is not None and held.rel_ci == (-1.0, math.inf)
    assert held.verdict is Verdict.UNDECIDED and "moved together" in (held.dependence_note or "")


def test_arms_interleaved_in_one_window_share_their_stalls_and_get_no_floor() -> None:
    # Both sides saw the same host stall (interleaved in one window): the floor for a tail resting
    # on a few episodes would count it twice; as separate runs it counts.
    rng = np.random.default_rng(43)
    x = 26 * rng.lognormal(0, 0.05, (2, 400))
    x[:, 200:210] *= 1.6
    apart = (
        compare_records(_run(x[0]), _run(x[1]), metrics=["ttft"], learned=_quiet()).metric("ttft").row("p95")
    )
    shared = (
        compare_records(_run(x[0]), _run(x[1]), metrics=["ttft"], same_window=True).metric("ttft").row("p95")
    )
    assert apart is not None and shared is not None and apart.change is not None and shared.change is not None
    assert shared.change.se_log < apart.change.se_log


def test_two_arms_of_a_few_users_each_cover_a_true_zero_change() -> None:
    # Arms of the gateway (one window), each with its own few users of their own speeds, truly equal.
    for users in (3, 5, 8):
        rng = np.random.default_rng([52, users])
        series, who = ds.per_user(rng, 80, 300, users=users, spread=0.3)
        covered, wrong = 0, 0
        for i in range(40):
            a, b = (
                Samples(
                    [np.array([v]) for v in series[2 * i + k]], None, [f"user:{k}{u}" for u in who[2 * i + k]]
                )
                for k in (0, 1)
            )
            m = compare_samples("ttft", [a], [b], (50.0, 95.0), resamples=100, seed=i, same_window=True)
            for row in m.rows:
                lo, hi = row.rel_ci or (None, None)
                covered += lo is not None and hi is not None and lo <= 0 <= hi
                wrong += row.verdict in (Verdict.SLOWER, Verdict.FASTER)
        assert covered >= 0.93 * 80 and wrong == 0, (users, covered, wrong)


def test_a_slowdown_on_a_few_users_is_undecided_for_want_of_users() -> None:
    rng = np.random.default_rng(53)
    x, who = ds.per_user(rng, 2, 400, users=5, spread=0.3)
    a, b = (
        Samples([np.array([v]) for v in (1 + 3 * k) * x[k]], None, [f"user:{k}{u}" for u in who[k]])
        for k in (0, 1)
    )
    row = compare_samples("ttft", [a], [b], (50.0,), resamples=200).rows[0]
    assert row.verdict is Verdict.UNDECIDED and row.dependence_note is not None
    assert "5 users" in row.dependence_note and "users would decide" in row.dependence_note
