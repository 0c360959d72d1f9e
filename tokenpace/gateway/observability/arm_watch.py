"""Per-arm views of a gray release for Grafana and Prometheus: each arm's TTFT, error rate, traffic
share and business events per request, and guard-rail alerts that fire when one arm runs worse than
the whole fleet (the arms together) for 15 minutes. ``tokenpace arms`` gives the verdict with
intervals; these rules are the pager's early warning between two looks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tokenpace.gateway.experiments.events import EVENTS
from tokenpace.gateway.observability import prom
from tokenpace.gateway.observability.prom import ERROR_OUTCOMES

WINDOW = "15m"
# Guard rails of the alerts (the defaults `tokenpace arms --guard` examples use).
ERROR_MARGIN = 0.005  # an arm's error rate 0.5 points above the fleet's
TTFT_FACTOR = 1.10  # an arm's TTFT P95 10 % above the fleet's
COMPLAINT_FACTOR = 1.5  # an arm's complaints per request 1.5 x the fleet's
COMPLAINT_EVENT = "complaint"


def _errors_by(by: str, window: str) -> str:
    sel = f'{prom.REQUESTS}{{outcome=~"{ERROR_OUTCOMES}"}}'
    return f"(sum by ({by}) (rate({sel}[{window}])) / sum by ({by}) (rate({prom.REQUESTS}[{window}])))"


def _errors_all(window: str) -> str:
    sel = f'{prom.REQUESTS}{{outcome=~"{ERROR_OUTCOMES}"}}'
    return f"(sum(rate({sel}[{window}])) / sum(rate({prom.REQUESTS}[{window}])))"


def _p95(by: str, window: str) -> str:
    inner = f"rate({prom.TTFT}_bucket[{window}])"
    return f"histogram_quantile(0.95, sum by ({by}) ({inner}))"


def _per_request(by: str, window: str, event: str) -> str:
    events = f'sum by ({by}) (rate({EVENTS}{{event="{event}"}}[{window}]))'
    return f"({events} / sum by ({by}) (rate({prom.REQUESTS}[{window}])))"


def arm_alert_rules() -> list[dict[str, Any]]:
    w = WINDOW
    two_arms = f"and on() count(count by (arm) (rate({prom.REQUESTS}[{w}]) > 0)) > 1"
    fleet_complaints = (
        f'(sum(rate({EVENTS}{{event="{COMPLAINT_EVENT}"}}[{w}])) / sum(rate({prom.REQUESTS}[{w}])))'
    )
    rules = [
        (
            "TokenpaceArmGuardRailErrors",
            f"{_errors_by('arm', w)} - on() group_left() {_errors_all(w)} > {ERROR_MARGIN:g} {two_arms}",
            f"arm {{{{ $labels.arm }}}}'s error rate is over {ERROR_MARGIN:.1%} above the fleet's",
        ),
        (
            "TokenpaceArmGuardRailTTFT",
            f"{_p95('arm, le', w)} > on() group_left() {TTFT_FACTOR:g} * {_p95('le', w)} {two_arms}",
            f"arm {{{{ $labels.arm }}}}'s TTFT P95 is over {TTFT_FACTOR - 1:.0%} above the fleet's",
        ),
        (
            "TokenpaceArmGuardRailComplaints",
            f"{_per_request('arm', w, COMPLAINT_EVENT)} > on() group_left() {COMPLAINT_FACTOR:g} * "
            f"{fleet_complaints} {two_arms}",
            f"arm {{{{ $labels.arm }}}} earns {COMPLAINT_FACTOR:g}x the fleet's complaints per request",
        ),
    ]
    return [
        {
            "alert": name,
            "expr": expr,
            "for": "15m",
            "labels": {"severity": "ticket"},
            "annotations": {
                "summary": summary,
                "description": "gray release: check `tokenpace arms --since 1h --guard ...` before widening",
            },
        }
        for name, expr, summary in rules
    ]


def arm_panels(panel: Callable[..., dict[str, Any]], first_id: int, y: int) -> list[dict[str, Any]]:
    """``panel`` is grafana._panel (id, title, targets, unit, x, y)."""
    rate = "$__rate_interval"
    share = (
        f"sum by (arm) (rate({prom.REQUESTS}[{rate}])) / on() group_left() sum(rate({prom.REQUESTS}[{rate}]))"
    )
    events = (
        f"sum by (arm, event) (rate({EVENTS}[{rate}])) / on(arm) group_left() "
        f"sum by (arm) (rate({prom.REQUESTS}[{rate}]))"
    )
    return [
        panel(first_id, "TTFT P95 by arm", [(_p95("arm, le", rate), "P95 {{arm}}")], "s", 0, y),
        panel(
            first_id + 1, "Error rate by arm", [(_errors_by("arm", rate), "{{arm}}")], "percentunit", 12, y
        ),
        panel(
            first_id + 2,
            "Traffic share by arm (against the split)",
            [(share, "{{arm}}")],
            "percentunit",
            0,
            y + 8,
        ),
        panel(
            first_id + 3,
            "Business events per request by arm",
            [(events, "{{event}} {{arm}}")],
            "short",
            12,
            y + 8,
        ),
    ]
