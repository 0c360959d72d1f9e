"""The gate looked at after every run: which side's run it needs next. With one baseline run, a
+20 % regression against a 5 % gate is never decided by candidate runs alone (the baseline's own
term keeps the interval across the threshold); run the side that limits, and it is decided."""

from __future__ import annotations

import numpy as np
import pytest

from tokenpace.core.analysis.comparison.gate import Threshold
from tokenpace.core.analysis.comparison.sequential_gate import (
    SeqItem,
    baseline_limits,
    sequential_gate,
    side_to_run,
)
from tokenpace.core.record import RequestRecord

MS = 1_000_000
GATE = [Threshold("ttft", 50.0, 0.05)]
BUDGET = 6


def run(rng: np.random.Generator, level: float, n: int = 200) -> list[RequestRecord]:
    """One run: TTFT around ``level`` ms, the run's own speed wandering 3 % (SD) from run to run."""
    speed = level * rng.lognormal(0, 0.03)
    out = []
    for i in range(n):
        r = RequestRecord(f"r{i}", sent_ns=(i + 1) * 10 * MS)
        r.first_token_ns = r.first_answer_ns = r.sent_ns + int(speed * rng.lognormal(0, 0.1) * MS)
        r.token_ns = [r.first_token_ns + k * 5 * MS for k in range(4)]
        r.output_tokens_counted, r.end_ns = 4, r.token_ns[-1]
        out.append(r)
    return out


def sequence(seed: int, change: float, baseline_reruns: bool) -> tuple[list[SeqItem], int, int]:
    """One stored run a side, then a run of the side ``side_to_run`` names after every look, until
    decided or nothing is left to run (each side at most ``BUDGET`` runs)."""
    rng = np.random.default_rng(seed)
    base, cand = [run(rng, 40.0)], [run(rng, 40.0 * (1 + change))]
    while True:
        items = sequential_gate(base, cand, GATE, [], rerun="ab" if baseline_reruns else "b", budget=BUDGET)
        left_a = BUDGET - len(base) if baseline_reruns else 0
        side = side_to_run(items, BUDGET, left_a, BUDGET - len(cand))
        if side is None:
            return items, len(base), len(cand)
        (base if side == "a" else cand).append(run(rng, 40.0 * (1 + (change if side == "b" else 0))))


def test_one_baseline_run_limits_the_decision_and_its_side_is_the_one_run_next() -> None:
    rng = np.random.default_rng(1)
    items = sequential_gate([run(rng, 40.0)], [run(rng, 48.0)], GATE, [], budget=BUDGET)
    (item,) = items
    assert item.outcome == "undecided" and item.needs is not None
    assert item.needs.candidate is None and item.needs.baseline is not None  # only baseline runs decide
    assert baseline_limits(items, BUDGET) == items
    assert side_to_run(items, BUDGET, baseline_left=5, candidate_left=5) == "a"
    # no baseline run left: no candidate run is run either, as no number of them would decide
    assert side_to_run(items, BUDGET, baseline_left=0, candidate_left=5) is None


def test_the_candidate_runs_while_it_is_the_side_that_limits() -> None:
    rng = np.random.default_rng(2)
    base = [run(rng, 40.0) for _ in range(6)]
    items = sequential_gate(base, [run(rng, 36.0)], GATE, [], budget=BUDGET)
    assert items[0].outcome == "undecided" and items[0].needs is not None and items[0].needs.candidate
    assert side_to_run(items, BUDGET, baseline_left=0, candidate_left=5) == "b"
    assert side_to_run([], BUDGET, baseline_left=5, candidate_left=5) == "b"  # no look yet: the candidate


def test_with_one_baseline_run_a_20_percent_regression_is_decided_once_the_baseline_side_runs() -> None:
    outcomes, alone = [], []
    for seed in range(12):
        # candidate runs alone: decided, or stopped with the baseline side named as the one limiting
        only_candidate, _, _ = sequence(seed, 0.20, baseline_reruns=False)
        alone.append(only_candidate[0].outcome)
        assert alone[-1] == "regressed" or baseline_limits(only_candidate, BUDGET)
        items, base_runs, cand_runs = sequence(seed, 0.20, baseline_reruns=True)
        outcomes.append(items[0].outcome)
        assert base_runs >= 2  # the baseline side was run first
        assert items[0].outcome == "regressed" or base_runs == cand_runs == BUDGET  # else both budgets spent
    assert outcomes.count("regressed") >= 10 and "pass" not in outcomes
    assert alone.count("regressed") < outcomes.count("regressed") and "pass" not in alone


@pytest.mark.parametrize("seed", range(8))
def test_an_unchanged_candidate_is_never_called_regressed_whichever_side_runs(seed: int) -> None:
    items, _, _ = sequence(100 + seed, 0.0, baseline_reruns=True)
    assert all(i.outcome != "regressed" for i in items)
