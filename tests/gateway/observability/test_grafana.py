"""The generated dashboard's template variables: model, upstream, arm, region and the fleet always,
each static label key too, and every panel's series filtered by the variables its metric has labels
for."""

from __future__ import annotations

import re

from tokenpace.core.metrics import Slo
from tokenpace.gateway.observability import prom
from tokenpace.gateway.observability.grafana import VARIABLES, dashboard, filtered


def _exprs(board: dict) -> list[tuple[str, str]]:
    return [(p["title"], t["expr"]) for p in board["panels"] for t in p["targets"]]


def test_the_dashboard_has_a_variable_for_model_upstream_arm_region_and_fleet() -> None:
    board = dashboard(Slo(ttft_ms=500))
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert list(variables) == ["datasource", "model", "upstream", "arm", "region", "gateway_fleet"]
    for key in VARIABLES:
        v = variables[key]
        assert v["query"] == f"label_values({prom.REQUESTS}, {key})"
        assert v["multi"] and v["includeAll"] and v["allValue"] == ".*"  # all by default


def test_every_latency_and_traffic_series_is_filtered_by_every_variable() -> None:
    board = dashboard(Slo(ttft_ms=500, tpot_ms=50), split_by=("zone",))
    assert [v["name"] for v in board["templating"]["list"]][-1] == "zone"
    for title, expr in _exprs(board):
        selectors = re.findall(r"(gen_ai_\w+|tokenpace_gateway_requests_total)\{([^}]*)\}", expr)
        for _metric, matchers in selectors:
            for key in (*VARIABLES, "zone"):
                assert f'{key}=~"${key}"' in matchers, (title, expr)
    # no bare selector of these metrics is left unfiltered
    assert not any(re.search(rf"{prom.REQUESTS}\[", e) for _, e in _exprs(board))


def test_a_series_without_a_label_is_filtered_only_by_the_labels_it_has() -> None:
    board = dashboard(Slo())
    events = next(e for t, e in _exprs(board) if t.startswith("Business events"))
    fleet = 'gateway_fleet=~"$gateway_fleet"'
    assert f'tokenpace_gateway_outcome_events_total{{arm=~"$arm", region=~"$region", {fleet}}}' in events
    assert "model=~" not in events.split("/")[0]  # events carry no model label
    inflight = next(e for t, e in _exprs(board) if t.startswith("In flight") and "dropped" not in e)
    assert inflight == f'{prom.IN_FLIGHT}{{region=~"$region", {fleet}}}'


def test_filtered_keeps_a_selectors_own_matchers_and_adds_no_duplicate() -> None:
    expr = f'rate({prom.TTFT}_bucket{{le="0.5", arm="a"}}[5m])'
    out = filtered(expr, ("region",))
    assert out == (
        f'rate({prom.TTFT}_bucket{{le="0.5", arm="a", model=~"$model", upstream=~"$upstream", '
        f'region=~"$region"}}[5m])'
    )
