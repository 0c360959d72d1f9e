"""Prometheus alert rules generated from the same SLO declarations that shape the buckets.

Each latency SLO threshold is a bucket bound (buckets.py), so the SLI "share of requests within
the threshold" is an exact bucket ratio. Burn-rate alerts follow the multiwindow scheme of the
Google SRE workbook: page at 14.4x budget burn over 1h (confirmed over 5m), ticket at 6x over 6h
(confirmed over 30m).
"""

from __future__ import annotations

from typing import Any

from prometheus_client.utils import floatToGoString

from tokenpace.core.metrics import Slo
from tokenpace.gateway.observability import prom
from tokenpace.gateway.observability.arm_watch import arm_alert_rules
from tokenpace.gateway.observability.engine_watch import ENGINE_WAITING, GPU_UTIL
from tokenpace.gateway.observability.prom import ERROR_OUTCOMES

BY = "model, upstream, api"  # an SLO line holds for each API on its own
# (severity, long window, short window, burn-rate factor)
BURN_WINDOWS = (("page", "1h", "5m", 14.4), ("ticket", "6h", "30m", 6.0))
TIMEOUT_OUTCOMES = "timeout_before_first_token|stall"


def _le(seconds: float) -> str:
    """The le label exactly as prometheus-client writes it (0.8 -> "0.8", 10 -> "10.0")."""
    return str(floatToGoString(seconds))


def _slis(slo: Slo) -> list[tuple[str, str, float]]:
    """(short name, histogram metric, threshold in seconds) for each latency SLO declared."""
    out = []
    if slo.ttft_ms is not None:
        out.append(("ttft", prom.TTFT, slo.ttft_ms / 1000))
    if slo.tpot_ms is not None:
        out.append(("tpot", prom.TPOT, slo.tpot_ms / 1000))
    if slo.e2e_ms is not None:
        out.append(("e2e", prom.E2E, slo.e2e_ms / 1000))
    return out


def _sel(metric: str, suffix: str, *matchers: str) -> str:
    """A selector; the E2E histogram also holds failures, so its latency SLIs take ok requests only."""
    if metric == prom.E2E:
        matchers = (*matchers, 'outcome="ok"')
    return f"{metric}{suffix}{{{','.join(matchers)}}}" if matchers else f"{metric}{suffix}"


def _bad_ratio(metric: str, seconds: float, window: str) -> str:
    le = 'le="' + _le(seconds) + '"'
    good = f"sum by ({BY}) (rate({_sel(metric, '_bucket', le)}[{window}]))"
    total = f"sum by ({BY}) (rate({_sel(metric, '_count')}[{window}]))"
    return f"(1 - {good} / {total})"


def alert_rules(slo: Slo, objective: float = 0.99, error_rate: float = 0.01) -> dict[str, Any]:
    """The rules file as a dict (YAML is written by to_yaml)."""
    budget = 1.0 - objective
    rules: list[dict[str, Any]] = []
    for name, metric, seconds in _slis(slo):
        rules.append(
            {
                "alert": f"TokenpaceP95{name.upper()}OverSLO",
                "expr": f"histogram_quantile(0.95, sum by ({BY}, le) "
                f"(rate({_sel(metric, '_bucket')}[5m]))) > {seconds:g}",
                "for": "10m",
                "labels": {"severity": "warning"},
                "annotations": {
                    "summary": f"P95 {name.upper()} of {{{{ $labels.model }}}} ({{{{ $labels.api }}}}) via "
                    f"{{{{ $labels.upstream }}}} is over its {seconds:g} s SLO"
                },
            }
        )
        for severity, long_w, short_w, factor in BURN_WINDOWS:
            threshold = factor * budget
            rules.append(
                {
                    "alert": f"Tokenpace{name.upper()}SLOBurn{severity.capitalize()}",
                    "expr": f"{_bad_ratio(metric, seconds, long_w)} > {threshold:g} and "
                    f"{_bad_ratio(metric, seconds, short_w)} > {threshold:g}",
                    "labels": {"severity": severity},
                    "annotations": {
                        "summary": f"{name.upper()} SLO ({seconds:g} s for {objective:.2%}) "
                        f"error budget burning {factor:g}x over {long_w}"
                    },
                }
            )
    total = f"sum by ({BY}) (rate({prom.REQUESTS}[5m]))"
    for name, outcomes, limit in (
        ("ErrorRate", ERROR_OUTCOMES, error_rate),
        ("TimeoutRate", TIMEOUT_OUTCOMES, error_rate),
        ("InterruptionRate", "upstream_abort_mid_stream", error_rate),
    ):
        rules.append(
            {
                "alert": f"Tokenpace{name}High",
                "expr": f'sum by ({BY}) (rate({prom.REQUESTS}{{outcome=~"{outcomes}"}}[5m]))'
                f" / {total} > {limit:g}",
                "for": "5m",
                "labels": {"severity": "warning"},
                "annotations": {
                    "summary": f"{name} of {{{{ $labels.model }}}} ({{{{ $labels.api }}}}) via "
                    f"{{{{ $labels.upstream }}}} over {limit:.1%}"
                },
            }
        )
    rules.append(
        {
            "alert": "TokenpaceGatewayDroppingRecords",
            "expr": f"rate({prom.DROPPED}[5m]) > 0",
            "for": "5m",
            "labels": {"severity": "warning"},
            "annotations": {"summary": "the gateway's record writer cannot keep up; records are dropped"},
        }
    )
    rules.append(capacity_rule())
    rules.extend(arm_alert_rules())
    return {"groups": [{"name": "tokenpace-gateway", "rules": rules}]}


CAPACITY_UTIL_PCT = 70  # the article's leading indicator: utilisation past it while the queue climbs


def capacity_rule() -> dict[str, Any]:
    """GPU utilisation (mean over an upstream's GPUs, 10 minutes) above 70 % while its engine's
    waiting requests rise: scale out or limit, before latency shows it (upstreams with gpu_metrics=)."""
    return {
        "alert": "TokenpaceUpstreamNearCapacity",
        "expr": f"avg by (upstream) (avg_over_time({GPU_UTIL}[10m])) > {CAPACITY_UTIL_PCT} "
        f"and on (upstream) deriv({ENGINE_WAITING}[10m]) > 0",
        "for": "5m",
        "labels": {"severity": "warning"},
        "annotations": {
            "summary": f"upstream {{{{ $labels.upstream }}}}: GPU utilisation above {CAPACITY_UTIL_PCT} % "
            "while waiting requests rise: scale out or limit"
        },
    }


def to_yaml(value: object, indent: int = 0) -> str:
    """A small YAML emitter for dicts, lists and scalars (strings always double-quoted, JSON-style)."""
    import json

    pad = "  " * indent
    if isinstance(value, dict):
        lines = []
        for k, v in value.items():
            if isinstance(v, dict | list) and v:
                lines.append(f"{pad}{k}:\n{to_yaml(v, indent + 1)}")
            else:
                lines.append(f"{pad}{k}: {json.dumps(v)}")
        return "\n".join(lines)
    if isinstance(value, list):
        lines = []
        for item in value:
            body = to_yaml(item, indent + 1)
            lines.append(f"{pad}- {body.lstrip()}")
        return "\n".join(lines)
    return f"{pad}{json.dumps(value)}"
