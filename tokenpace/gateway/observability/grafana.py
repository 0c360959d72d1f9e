"""A Grafana dashboard (JSON model) on the gateway's metric names, with SLO lines from the same SLOs,
and a variable for each of model, upstream, arm, region, fleet and the gateway's other static labels
that every panel's series are filtered by. Every series is summed over the pods scraped: a fleet's
replicas are judged together."""

from __future__ import annotations

import re
from typing import Any

from tokenpace.core.metrics import Slo
from tokenpace.gateway.experiments.events import EVENTS
from tokenpace.gateway.observability import prom
from tokenpace.gateway.observability.arm_watch import arm_panels
from tokenpace.gateway.observability.engine_watch import ENGINE_WAITING, GPU_UTIL
from tokenpace.gateway.observability.rules import _le

BY = "model, upstream, arm, api"  # api: an embeddings TTFT (its E2E) never mixes with a chat TTFT
# The dashboard's variables, always there: region a static label (``--label region=...``),
# gateway_fleet on every sample of a fleet's replica (``--fleet``); a series without the label still
# matches its default (all: ".*" matches the empty value).
VARIABLES = ("model", "upstream", "arm", "region", "gateway_fleet")
_ALWAYS = ("region", "gateway_fleet")  # on every series that has them
# The labels a metric carries beside the static ones: a variable filters only the series that have it.
_METRIC_KEYS = {
    prom.TTFT: ("model", "upstream", "arm"),
    prom.TPOT: ("model", "upstream", "arm"),
    prom.E2E: ("model", "upstream", "arm"),
    prom.TOKENS: ("model", "upstream", "arm"),
    prom.REQUESTS: ("model", "upstream", "arm"),
    EVENTS: ("arm",),
    prom.IN_FLIGHT: (),
    prom.DROPPED: (),
}
_SELECTOR = re.compile(
    "(" + "|".join(re.escape(m) for m in sorted(_METRIC_KEYS, key=len, reverse=True)) + r")"
    r"(_bucket|_sum|_count)?(\{[^}]*\})?(?![\w{])"
)


def _panel(
    pid: int,
    title: str,
    targets: list[tuple[str, str]],
    unit: str,
    x: int,
    y: int,
    threshold: float | None = None,
) -> dict[str, Any]:
    panel: dict[str, Any] = {
        "id": pid,
        "type": "timeseries",
        "title": title,
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "gridPos": {"h": 8, "w": 12, "x": x, "y": y},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "targets": [
            {"refId": chr(65 + i), "expr": e, "legendFormat": legend} for i, (e, legend) in enumerate(targets)
        ],
    }
    if threshold is not None:
        panel["fieldConfig"]["defaults"]["thresholds"] = {
            "mode": "absolute",
            "steps": [{"color": "green", "value": None}, {"color": "red", "value": threshold}],
        }
        panel["fieldConfig"]["defaults"]["custom"] = {"thresholdsStyle": {"mode": "line"}}
    return panel


def _quantiles(metric: str, extra: str = "", split_by: tuple[str, ...] = ()) -> list[tuple[str, str]]:
    """P50/P95/P99 per model, upstream, arm and API, and per static label (``split_by``)."""
    sel = f"{metric}_bucket{{{extra}}}" if extra else f"{metric}_bucket"
    by = ", ".join((BY, *split_by))
    legend = " ".join(["{{arm}} {{api}}", *(f"{{{{{key}}}}}" for key in split_by)])
    return [
        (
            f"histogram_quantile({q}, sum by ({by}, le) (rate({sel}[$__rate_interval])))",
            f"P{int(q * 100)} {legend}",
        )
        for q in (0.5, 0.95, 0.99)
    ]


def _variable(key: str) -> dict[str, Any]:
    """A dashboard variable over a static label's values (all of them by default)."""
    return {
        "name": key,
        "type": "query",
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "query": f"label_values({prom.REQUESTS}, {key})",
        "refresh": 2,
        "multi": True,
        "includeAll": True,
        "allValue": ".*",
    }


def filtered(expr: str, statics: tuple[str, ...]) -> str:
    """``expr`` with each of its metric selectors filtered by the dashboard variables its metric has
    labels for (``statics``: the static label keys, on every series)."""

    def add(m: re.Match[str]) -> str:
        metric, suffix, braces = m.group(1), m.group(2) or "", m.group(3)
        keys = (*_METRIC_KEYS[metric], *statics)
        own = [braces[1:-1]] if braces and braces[1:-1].strip() else []
        matchers = [*own, *(f'{key}=~"${key}"' for key in keys if f"{key}=" not in (braces or ""))]
        return f"{metric}{suffix}{{{', '.join(matchers)}}}"

    return _SELECTOR.sub(add, expr)


def _with_exemplars(panel: dict[str, Any]) -> dict[str, Any]:
    """Show the histogram's exemplars (trace ids of requests in each bucket) on the panel: with the
    Prometheus data source's trace link (``exemplarTraceIdDestinations``, label ``trace_id``) a P95
    point opens the traces behind it."""
    for target in panel["targets"]:
        target["exemplar"] = True
    return panel


def gpu_panel(above: list[dict[str, Any]]) -> dict[str, Any]:
    """GPU utilisation (mean over each upstream's GPUs) beside the engine's waiting requests, below
    the other panels; the line at 70 % is the capacity warning's (rules.py)."""
    pid = max(p["id"] for p in above) + 1
    y = max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in above)
    targets = [
        (f"avg by (upstream) ({GPU_UTIL})", "{{upstream}} GPU utilisation %"),
        (ENGINE_WAITING, "{{upstream}} waiting requests"),
    ]
    return _panel(pid, "GPU utilisation and the engine's queue", targets, "short", 0, y, 70.0)


def dashboard(slo: Slo, split_by: tuple[str, ...] = ()) -> dict[str, Any]:
    """``split_by``: the gateway's static label keys (``--label region=...``): a variable each, and
    the latency panels split by them."""
    s = lambda ms: None if ms is None else ms / 1000  # noqa: E731
    q = lambda metric, extra="": _quantiles(metric, extra, split_by)  # noqa: E731
    panels = [
        _with_exemplars(_panel(1, "TTFT (gateway)", q(prom.TTFT), "s", 0, 0, s(slo.ttft_ms))),
        _panel(2, "Time per output token", q(prom.TPOT), "s", 12, 0, s(slo.tpot_ms)),
        _panel(3, "E2E (ok requests)", q(prom.E2E, 'outcome="ok"'), "s", 0, 8, s(slo.e2e_ms)),
        _panel(
            4,
            "Requests by outcome",
            [(f"sum by (outcome) (rate({prom.REQUESTS}[$__rate_interval]))", "{{outcome}}")],
            "reqps",
            12,
            8,
        ),
        _panel(
            5,
            "Output tokens / s",
            [
                (
                    f"sum by ({BY}) "
                    f'(rate({prom.TOKENS}_sum{{gen_ai_token_type="output"}}[$__rate_interval]))',
                    "{{arm}}",
                )
            ],
            "short",
            0,
            16,
        ),
        _panel(
            6,
            "In flight, records dropped",
            [(prom.IN_FLIGHT, "in flight"), (f"rate({prom.DROPPED}[$__rate_interval])", "dropped/s")],
            "short",
            12,
            16,
        ),
    ]
    if slo.ttft_ms is not None:
        le = _le(slo.ttft_ms / 1000)
        panels.append(
            _panel(
                7,
                f"Share of requests with TTFT <= {slo.ttft_ms:g} ms (exact: a bucket bound)",
                [
                    (
                        f'sum by ({BY}) (rate({prom.TTFT}_bucket{{le="{le}"}}[$__rate_interval])) / '
                        f"sum by ({BY}) (rate({prom.TTFT}_count[$__rate_interval]))",
                        "{{arm}}",
                    )
                ],
                "percentunit",
                0,
                24,
            )
        )
    panels += arm_panels(_panel, 8, 32)  # the gray release, arm by arm
    panels.append(gpu_panel(panels))
    statics = tuple(dict.fromkeys((*_ALWAYS, *split_by)))
    for panel in panels:
        for target in panel["targets"]:
            target["expr"] = filtered(target["expr"], statics)
    return {
        "title": "tokenpace gateway",
        "uid": "tokenpace-gateway",
        "schemaVersion": 39,
        "time": {"from": "now-1h", "to": "now"},
        "refresh": "30s",
        "templating": {
            "list": [
                {"name": "datasource", "type": "datasource", "query": "prometheus"},
                *(_variable(key) for key in dict.fromkeys((*VARIABLES, *split_by))),
            ]
        },
        "panels": panels,
    }
