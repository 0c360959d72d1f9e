"""Noise between runs: its estimate from repeated runs, intervals that count it, and the gate's
false-alarm rate and power when the server's speed wanders +-3 % from run to run."""

from __future__ import annotations

import numpy as np
import pytest
from baseline_fixtures import make_record

from tokenpace.core.analysis.comparison.compare import compare_records, compare_runs_records
from tokenpace.core.analysis.comparison.gate import evaluate, parse_thresholds
from tokenpace.core.analysis.evidence.repeats import repeat_noise
from tokenpace.core.analysis.evidence.runchange import change
from tokenpace.core.analysis.evidence.runnoise import group_noise, pool, t_quantile

RUNS_A_SIDE = 6  # the documented sample size: bench --repeat 6 for baseline and candidate
WANDER = 0.03  # each run's true speed is uniform within +-3 % of the server's


@pytest.mark.parametrize(("df", "want"), [(1, 12.706), (2, 4.303), (4, 2.776), (10, 2.228), (30, 2.042)])
def test_t_quantiles_match_the_table(df: int, want: float) -> None:
    assert t_quantile(0.975, df) == pytest.approx(want, rel=0.005)


def test_group_noise_removes_the_sampling_part() -> None:
    values = [100.0, 102.0, 98.0, 101.0, 99.0]
    total = float(np.var(np.log(values), ddof=1))
    only_sampling = group_noise("tpot.p50", values, [1.6] * 5)  # the spread is all sampling error
    assert only_sampling is not None and only_sampling.rel_var < 0.1 * total
    real = group_noise("tpot.p50", values, [0.1] * 5)
    assert real is not None and real.rel_var == pytest.approx(total - 1e-6, rel=0.01)
    assert group_noise("tpot.p50", [100.0], [1.0]) is None  # one run: nothing between runs


def test_pool_weighs_groups_by_degrees_of_freedom_and_assumes_without_any() -> None:
    a, b = group_noise("x.p95", [1.0, 1.1], [0, 0]), group_noise("x.p95", [1.0] * 4 + [1.01], [0] * 5)
    assert a is not None and b is not None
    pooled = pool("x.p95", [a, b])
    raw = (a.rel_var + 4 * b.rel_var) / 5
    assert pooled.raw_sd is not None and pooled.raw_sd**2 == pytest.approx(raw)
    # shrunk toward the 5 % prior (half the assumed 10 %) worth 1 degree of freedom, added to theirs
    assert pooled.df == 6 and pooled.rel_sd**2 == pytest.approx((1 * 0.05**2 + 5 * raw) / 6)
    assert not pooled.assumed and "from 7 runs in 2 group(s)" in pooled.describe()
    assert "5% prior worth 1 run(s)" in pooled.describe()


def test_a_handful_of_runs_never_learns_zero_noise_and_many_runs_outweigh_the_prior() -> None:
    flat = group_noise("x.p50", [1.0, 1.0, 1.0], [0.02, 0.02, 0.02])  # spread under the sampling noise
    assert flat is not None and flat.rel_var == 0.0
    few = pool("x.p50", [flat])
    assert few.rel_sd == pytest.approx(0.025 * (1 / 3) ** 0.5)  # a third of the prior's: never 0
    rng = np.random.default_rng(3)
    many = [g for _ in range(20) if (g := group_noise("x.p50", np.exp(rng.normal(0, 0.02, 5)), [0] * 5))]
    learned = pool("x.p50", many)
    assert learned.df == 81 and 0.017 < learned.rel_sd < 0.025  # the truth (2 %), barely pulled up
    none = pool("x.p95", [])
    assert none.assumed and none.rel_sd == 0.10 and "assumed" in none.describe()
    assert pool("x.p50", []).rel_sd == 0.05


def _side(rng: np.random.Generator, level: float, runs: int, sampling: float = 0.01):
    """Runs of a server whose speed wanders +-3 % per run, each with 1 % sampling error."""
    x = level * rng.uniform(1 - WANDER, 1 + WANDER, runs) * np.exp(rng.normal(0, sampling, runs))
    return x, x * sampling


def _gate_outcomes(truth: float, pairs: int, seed: int) -> dict[str, int]:
    rng = np.random.default_rng(seed)
    counts = {"regressed": 0, "pass": 0, "undecided": 0}
    for _ in range(pairs):
        a, se_a = _side(rng, 10.0, RUNS_A_SIDE)
        b, se_b = _side(rng, 10.0 * truth, RUNS_A_SIDE)
        own = [g for g in (group_noise("tpot.p95", a, se_a), group_noise("tpot.p95", b, se_b)) if g]
        ch = change(a, se_a, b, se_b, pool("tpot.p95", own), 0.05, 0.05, False, one_sided=True)
        assert ch.rel_lo is not None and ch.rel_hi is not None
        key = "regressed" if ch.rel_lo > 0.05 else "pass" if ch.rel_hi < 0.05 else "undecided"
        counts[key] += 1
    return counts


def test_a_5_percent_gate_rarely_cries_wolf_and_catches_a_10_percent_regression() -> None:
    pairs = 400
    for truth in (1.0, 0.99, 1.03):  # unchanged, 1 % faster, 3 % slower: none beyond 5 %
        assert _gate_outcomes(truth, pairs, seed=1)["regressed"] <= 0.05 * pairs, truth
    caught = _gate_outcomes(1.10, pairs, seed=2)["regressed"]
    assert caught >= 0.85 * pairs  # 88 %: the learned noise is shrunk toward its prior (runnoise)
    assert _gate_outcomes(1.0, pairs, seed=3)["pass"] >= 0.90 * pairs  # and it says pass, not undecided


def _records(rng: np.random.Generator, itl_ms: float, n: int = 120) -> list:
    return [make_record(i, 40 * rng.lognormal(0, 0.1), itl_ms * rng.lognormal(0, 0.05), 12) for i in range(n)]


def test_repeated_records_teach_the_noise_and_groups_judge_as_one_side() -> None:
    rng = np.random.default_rng(5)
    base = [_records(rng, 10.0 * rng.uniform(0.97, 1.03)) for _ in range(RUNS_A_SIDE)]
    learned = {g.key: g for g in repeat_noise(base)}
    assert {"tpot.p50", "itl.p95", "ttft.p95"} <= set(learned) and "ttft.p99" not in learned  # 120 < 500
    assert 0.005 < learned["tpot.p50"].rel_var ** 0.5 < 0.04  # the +-3 % wander (SD 1.7 %) is seen
    slower = [_records(rng, 11.0 * rng.uniform(0.97, 1.03)) for _ in range(RUNS_A_SIDE)]
    c = compare_runs_records(base, slower, percentiles=[50, 95], metrics=["tpot"], resamples=200)
    assert c.runs_a == c.runs_b == RUNS_A_SIDE and not c.assumed_noise
    item = evaluate(c, parse_thresholds("tpot.p50=5%"))[0]
    # the noise used is its 95 % upper bound (8 degrees of freedom here): a little less sensitive
    assert item.outcome == "regressed" and item.detectable is not None and item.detectable < 0.11
    same = [_records(rng, 10.0 * rng.uniform(0.97, 1.03)) for _ in range(RUNS_A_SIDE)]
    c_same = compare_runs_records(base, same, percentiles=[50], metrics=["tpot"], resamples=200)
    assert evaluate(c_same, parse_thresholds("tpot.p50=5%"))[0].outcome == "pass"


def test_arms_of_one_window_count_no_noise_between_runs() -> None:
    rng = np.random.default_rng(6)
    a, b = _records(rng, 10.0), _records(rng, 11.0)
    together = compare_records(a, b, percentiles=[50], metrics=["tpot"], same_window=True)
    row = together.metric("tpot").row("p50")
    assert row is not None and row.noise is not None and row.noise.concurrent and not together.assumed_noise
    apart = compare_records(a, b, percentiles=[50], metrics=["tpot"]).metric("tpot").row("p50")
    assert apart is not None and apart.rel_ci is not None and row.rel_ci is not None
    assert (row.rel_ci[1] or 0) - (row.rel_ci[0] or 0) < (apart.rel_ci[1] or 0) - (apart.rel_ci[0] or 0)
