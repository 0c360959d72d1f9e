"""Costs, the recommendation and the tiered-routing estimate, on numbers worked out by hand."""

from __future__ import annotations

import pytest

from tokenpace.core.analysis.selection.cost import (
    Cost,
    cost_of,
    mixture_percentile,
    pareto_front,
    recommend,
    tiered,
)
from tokenpace.core.analysis.selection.scenarios import Prices, Scenario, SloLine
from tokenpace.core.analysis.selection.select import Cell, Placement, Verdict

LINE = SloLine("ttft", "p95", 800.0)
SCENARIO = Scenario("s", "", 1000, 200, 4.0, None, (LINE,))


def verdict(name: str, status: str = "pass", upper: float = 400.0, good: float | None = 10.0) -> Verdict:
    values = {"prompt_tokens": 1000.0, "output_tokens": 200.0}
    cell = Cell(LINE.label(), status, upper * 0.9, upper, "", LINE.threshold_ms)
    return Verdict(name, "run", Placement(True, "", values), (cell,), (), good)


def test_api_price_is_tokens_times_prices():
    c = cost_of(Prices(input_per_mtok=1.0, output_per_mtok=4.0), verdict("a"))
    assert isinstance(c, Cost)
    per_request = (1000 * 1.0 + 200 * 4.0) / 1e6  # $0.0018
    assert c.per_request == pytest.approx(per_request)
    assert c.per_k_requests == pytest.approx(1.8)
    assert c.per_mtok_output == pytest.approx(per_request / 200 * 1e6)  # $9 per million output tokens


def test_hourly_price_is_divided_by_the_goodput_a_replica_sustains():
    c = cost_of(Prices(hourly=3.6), verdict("a", good=10.0))  # $0.001 per second over 10 good req/s
    assert isinstance(c, Cost)
    assert c.per_request == pytest.approx(0.0001)
    assert c.per_mtok_output == pytest.approx(0.0001 / 200 * 1e6)
    assert isinstance(cost_of(Prices(hourly=3.6), verdict("b", good=0.0)), str)


def test_the_cheapest_passing_candidate_is_recommended_never_a_failing_one():
    vs = [verdict("cheap-but-fails", status="fail"), verdict("dear", upper=100), verdict("cheap", upper=700)]
    costs = {
        "cheap-but-fails": Cost(0.0001, 0.1, None, ""),
        "dear": Cost(0.01, 10.0, None, ""),
        "cheap": Cost(0.001, 1.0, None, ""),
    }
    rec = recommend(vs, costs)
    assert rec.candidate == "cheap"
    assert rec.margin == pytest.approx(1 - 700 / 800)
    assert recommend(vs, {}).candidate == "dear"  # no prices: furthest under the line
    assert recommend([verdict("x", status="fail")], costs).candidate is None


def test_mixture_percentile_weights_each_distribution_by_its_share():
    fast, slow = [10.0] * 100, [1000.0] * 100
    assert mixture_percentile(fast, slow, 0.96, 0.95) == 10.0  # 96 % of requests are fast
    assert mixture_percentile(fast, slow, 0.90, 0.95) == 1000.0  # only 90 %: the P95 is slow


def test_tiered_routing_blends_latency_and_cost():
    small, large = verdict("small"), verdict("large")
    t = tiered(
        SCENARIO,
        0.6,
        (small, {"ttft_ms": [100.0] * 100}, Cost(0.001, 1.0, None, "")),
        (large, {"ttft_ms": [500.0] * 100}, Cost(0.003, 3.0, None, "")),
    )
    assert t.lines[0]["blended"] == 500.0 and t.lines[0]["passes"]
    assert t.per_k_requests == pytest.approx(0.6 * 1.0 + 0.4 * 3.0)


def test_the_pareto_front_keeps_only_candidates_no_other_beats_on_latency_and_cost():
    points = [
        ("fast-dear", 100.0, 9.0),
        ("slow-cheap", 400.0, 1.0),
        ("dominated", 500.0, 5.0),
        ("mid", 200.0, 3.0),
    ]
    assert pareto_front(points) == ["fast-dear", "mid", "slow-cheap"]
