"""`vllm bench serve` flag names accepted by `tokenpace bench` where they mean the same, and
``--vllm-json`` (the result with `--save-result` keys). docs/vllm.md maps each flag."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from tokenpace.adapters.vllm_json import METRICS

_GOODPUT_KEYS = {"ttft": "ttft", "tpot": "tpot", "e2el": "e2e"}

_OPTIONS = [
    click.option("--num-prompts", type=int, help="vLLM name of --requests."),
    click.option("--request-rate", help="vLLM name of --rate; inf (vLLM's default) sends all at once."),
    click.option("--num-warmups", type=int, help="vLLM name of --warmup."),
    click.option(
        "--goodput",
        "goodput",
        multiple=True,
        metavar="KEY:MS",
        help="vLLM-style SLOs in ms (ttft:500, tpot:50, e2el:1000; repeat the flag or quote a list).",
    ),
    click.option(
        "--percentile-metrics",
        default="ttft,tpot,itl",
        show_default=True,
        help="--vllm-json: metrics to give percentiles for (ttft, tpot, itl, e2el).",
    ),
    click.option(
        "--metric-percentiles",
        default="99",
        show_default=True,
        help="--vllm-json: percentiles, e.g. 25,50,99,99.9.",
    ),
    click.option("--extra-body", metavar="JSON", help="A JSON object merged into every request body."),
    click.option(
        "--ready-check-timeout-sec",
        type=click.FloatRange(0),
        default=0.0,
        help="Wait up to this long for the endpoint to answer before starting (default: ask once).",
    ),
    click.option(
        "--vllm-json",
        type=click.Path(dir_okay=False, path_type=Path),
        help="Also write the result with `vllm bench serve --save-result` keys.",
    ),
]


def vllm_options(f: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed(_OPTIONS):
        f = option(f)
    return f


def _same(o: dict[str, Any], ours: str, theirs: str, value: Any, flag: str) -> None:
    if value is None:
        return
    if o[ours] is not None and o[ours] != value:
        raise click.BadParameter(f"--{ours.replace('_', '-')} and {flag} say different things: give one")
    o[ours] = value


def apply(o: dict[str, Any]) -> None:
    """Turn the vLLM names into tokenpace's own options (before the config is built)."""
    _same(o, "requests", "num_prompts", o["num_prompts"], "--num-prompts")
    if o["num_warmups"] is not None:
        o["warmup"] = o["num_warmups"]
    if o["request_rate"] is not None:
        _request_rate(o)
    if o["goodput"]:
        if o["slo"]:
            raise click.BadParameter("--slo and --goodput both set SLOs: give one")
        o["slo"] = ",".join(_goodput_part(part) for spec in o["goodput"] for part in spec.split())


def _request_rate(o: dict[str, Any]) -> None:
    try:
        rate = float(o["request_rate"])
    except ValueError:
        raise click.BadParameter(
            f"--request-rate {o['request_rate']!r}: a number of requests/s, or inf"
        ) from None
    if math.isnan(rate) or rate <= 0:
        raise click.BadParameter("--request-rate must be positive (or inf)")
    if math.isinf(rate):  # vLLM: every request at once, held back only by --max-concurrency
        if o["rate"] is not None:
            raise click.BadParameter("--rate and --request-rate inf say different things: give one")
        cap = o["max_concurrency"] or o["requests"] or o["num_prompts"]
        if cap is None:
            raise click.BadParameter("--request-rate inf needs --max-concurrency or --num-prompts")
        _same(o, "concurrency", "request_rate", cap, "--request-rate inf")
        o["max_concurrency"] = None
    else:
        _same(o, "rate", "request_rate", rate, "--request-rate")


def _goodput_part(part: str) -> str:
    key, sep, value = part.partition(":")
    if not sep or key not in _GOODPUT_KEYS:
        raise click.BadParameter(f"--goodput {part!r}: use ttft:MS, tpot:MS or e2el:MS")
    try:
        ms = float(value)
    except ValueError:
        raise click.BadParameter(f"--goodput {part!r}: {value!r} is not a number of milliseconds") from None
    return f"{_GOODPUT_KEYS[key]}={ms:g}ms"


def extra_body(o: dict[str, Any]) -> dict[str, Any]:
    text = o["extra_body"]
    if not text:
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise click.BadParameter(f"--extra-body is not JSON: {exc.msg}") from None
    if not isinstance(value, dict):
        raise click.BadParameter("--extra-body must be a JSON object, e.g. '{\"top_k\": 20}'")
    return value


def export(o: dict[str, Any]) -> dict[str, Any]:
    """The RunOutputs fields of --vllm-json."""
    metrics = tuple(m.strip() for m in o["percentile_metrics"].split(",") if m.strip())
    unknown = [m for m in metrics if m not in METRICS]
    if unknown or not metrics:
        raise click.BadParameter(f"--percentile-metrics: choose from {', '.join(METRICS)}")
    try:
        percentiles = tuple(float(p) for p in o["metric_percentiles"].split(","))
    except ValueError:
        raise click.BadParameter("--metric-percentiles: numbers, e.g. 50,90,99,99.9") from None
    if not all(0 < p <= 100 for p in percentiles):
        raise click.BadParameter("--metric-percentiles: each between 0 and 100")
    return {"vllm_json": o["vllm_json"], "vllm_metrics": metrics, "vllm_percentiles": percentiles}
