"""`vllm bench serve` flags accepted by `tokenpace bench` with vLLM's meaning (load, SLOs, result
saving here; target and refusals in cli.vllm_target; datasets in cli.vllm_data), and ``--vllm-json``
(the result with `--save-result` keys). docs/vllm-reference.md maps every flag."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from tokenpace.app.run.files import METRICS, VllmExport, default_file_name
from tokenpace.app.run.terms import Ramp
from tokenpace.cli import parsing
from tokenpace.cli.vllm import vllm_data, vllm_target

_GOODPUT_KEYS = {"ttft": "ttft", "tpot": "tpot", "e2el": "e2e"}
_BACKEND_OF_API = {"completions": "openai", "chat": "openai-chat"}  # vLLM's backend names

_OPTIONS: list[Callable[[Callable[..., Any]], Callable[..., Any]]] = [
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
    click.option("--save-result", is_flag=True, help="vLLM: write its result JSON (as --vllm-json does)."),
    click.option(
        "--save-detailed", is_flag=True, help="vLLM: keep per-request lists and generated_texts in it."
    ),
    click.option("--append-result", is_flag=True, help="vLLM: append the result as a line to the file."),
    click.option(
        "--metadata", multiple=True, metavar="KEY=VALUE", help="vLLM: keys added to its result JSON."
    ),
    click.option("--result-dir", type=click.Path(file_okay=False, path_type=Path), help="vLLM: its folder."),
    click.option("--result-filename", help="vLLM: its file name (default: vLLM's own pattern)."),
    click.option(
        "--ramp-up-strategy",
        type=click.Choice(["linear", "exponential"]),
        help="Ramp the load up: the rate from --ramp-up-start-rps to --ramp-up-end-rps (vLLM), or the "
        "users of a closed loop, over --ramp-up (default: the whole run, as vLLM does for rates).",
    ),
    click.option("--ramp-up-start-rps", type=float, help="vLLM: the ramp's first rate (requests/s)."),
    click.option("--ramp-up-end-rps", type=float, help="vLLM: the ramp's last rate (requests/s)."),
    click.option(
        "--ramp-up",
        "ramp_up",
        metavar="DURATION",
        help="Ramp over this long, then hold the load; left out of the steady window (docs/vllm.md).",
    ),
    *vllm_target.OPTIONS,
    *vllm_data.OPTIONS,
]


def vllm_options(f: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed(_OPTIONS):
        f = option(f)
    return f


def _given(key: str) -> bool:
    ctx = click.get_current_context(silent=True)
    return ctx is not None and ctx.get_parameter_source(key) is click.core.ParameterSource.COMMANDLINE


def _same(o: dict[str, Any], ours: str, theirs: str, value: Any, flag: str) -> None:
    if value is None:
        return
    if o[ours] is not None and o[ours] != value:
        raise click.BadParameter(f"--{ours.replace('_', '-')} and {flag} say different things: give one")
    o[ours] = value


# vLLM flags a sweep has no use for: it sets the load per step and writes its own sweep JSON
_NOT_IN_A_SWEEP = (
    "request_rate", "ramp_up_strategy", "ramp_up_start_rps", "ramp_up_end_rps", "ramp_up", "vllm_json",
    "save_result", "save_detailed", "append_result", "result_dir", "result_filename", "metadata",
)  # fmt: skip


def apply(o: dict[str, Any]) -> dict[str, Any]:
    """Turn the vLLM names into tokenpace's own options (before the config is built); returns what
    names vLLM's result (its label and model id)."""
    identity = _apply_shared(o)
    _ramp(o)
    if o["request_rate"] is not None:
        _request_rate(o)
    return identity


def apply_for_sweep(o: dict[str, Any]) -> None:
    """The vLLM flags that mean the same for every step of a sweep (target, dataset, sampling, SLOs,
    counts); those that set the load or vLLM's result file are refused by name."""
    for key in _NOT_IN_A_SWEEP:
        if o.get(key) not in (None, False, ()):
            raise click.BadParameter(
                f"--{key.replace('_', '-')}: a sweep sets the load of each step and writes its own "
                "sweep JSON; use it with `tokenpace bench`"
            )
    _apply_shared(o)


def _apply_shared(o: dict[str, Any]) -> dict[str, Any]:
    vllm_target.refuse_unhonoured(o)
    identity = vllm_target.apply_identity(o)
    vllm_target.apply_target(o)
    vllm_data.apply_dataset(o)
    _same(o, "requests", "num_prompts", o["num_prompts"], "--num-prompts")
    if o["burstiness"] != 1.0 and not _given("arrival"):
        o["arrival"] = "gamma"  # vLLM: --burstiness is the gamma shape of every finite rate
    if o["num_warmups"] is not None:
        o["warmup"] = o["num_warmups"]
    if o["goodput"]:
        if o["slo"]:
            raise click.BadParameter("--slo and --goodput both set SLOs: give one")
        o["slo"] = ",".join(_goodput_part(part) for spec in o["goodput"] for part in spec.split())
    return identity


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


def _ramp(o: dict[str, Any]) -> None:
    """--ramp-up-strategy/-start-rps/-end-rps (vLLM: a rate ramp over every request) and
    --ramp-up DURATION (tokenpace: ramp over that long, then hold; with --concurrency, the users)."""
    strategy, start, end, span = (
        o["ramp_up_strategy"], o["ramp_up_start_rps"], o["ramp_up_end_rps"], o["ramp_up"]
    )  # fmt: skip
    if strategy is None and span is None:
        if start is not None or end is not None:
            raise click.BadParameter("--ramp-up-start-rps/--ramp-up-end-rps need --ramp-up-strategy")
        o["ramp"] = None
        return
    duration = parsing.duration_s(span, "--ramp-up") if span else None
    if start is not None or end is not None:
        if start is None or end is None:
            raise click.BadParameter("a rate ramp needs both --ramp-up-start-rps and --ramp-up-end-rps")
        if str(o["request_rate"]).strip().lower() == "inf":
            o["request_rate"] = None  # vLLM's default: the ramp sets the rate
        if o["rate"] is not None or o["request_rate"] is not None:
            raise click.BadParameter(
                "the ramp sets the rate: drop --request-rate/--rate (vLLM refuses them together too)"
            )
        if o["concurrency"] is not None:
            raise click.BadParameter(
                "a rate ramp is open loop: drop --concurrency (cap it with --max-concurrency)"
            )
        o["rate"] = end
    o["ramp"] = Ramp(strategy or "linear", duration, start, end)


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
    """--extra-body, with vLLM's sampling flags that have no tokenpace flag of their own."""
    sampling = vllm_target.sampling_body(o)
    text = o["extra_body"]
    if not text:
        return sampling
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise click.BadParameter(f"--extra-body is not JSON: {exc.msg}") from None
    if not isinstance(value, dict):
        raise click.BadParameter("--extra-body must be a JSON object, e.g. '{\"top_k\": 20}'")
    return {**sampling, **value}


def export(o: dict[str, Any], identity: dict[str, Any]) -> dict[str, Any]:
    """The RunOutputs field of --vllm-json / --save-result (None when neither is asked)."""
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
    path = _result_path(o, identity)
    if path is None:
        return {"vllm": None}
    extra = {"label": identity["label"], "tokenizer_id": _tokenizer_id(o, identity)}
    extra.update(_metadata(o["metadata"]))
    return {
        "vllm": VllmExport(
            path=path,
            metrics=metrics,
            percentiles=percentiles,
            detailed=o["save_detailed"] or not (o["save_result"] or o["append_result"]),
            append=o["append_result"],
            model_id=identity["model_id"],
            backend=o.get("backend") or o.get("endpoint_type") or _BACKEND_OF_API.get(o["api"], "tokenpace"),
            extra=extra,
        )
    }


def _result_path(o: dict[str, Any], identity: dict[str, Any]) -> Path | None:
    if o["vllm_json"] is not None:
        if o["save_result"] or o["append_result"] or o["result_filename"] or o["result_dir"]:
            raise click.BadParameter(
                "--vllm-json and --save-result/--result-filename name two files: give one"
            )
        return Path(o["vllm_json"])
    if not (o["save_result"] or o["append_result"]):
        return None
    name = o["result_filename"] or default_file_name(
        identity["label"] or o.get("backend") or "openai",
        o.get("request_rate") or "inf",
        o.get("max_concurrency"),
        identity["model_id"] or o.get("model") or "model",
        ramp=(o["ramp_up_strategy"], o["ramp_up_start_rps"], o["ramp_up_end_rps"]),
    )
    return (o["result_dir"] / name) if o["result_dir"] else Path(name)


def _tokenizer_id(o: dict[str, Any], identity: dict[str, Any]) -> str | None:
    """vLLM's tokenizer_id: --tokenizer when given (a path or a hub name), else the model's name."""
    tok = identity.get("tokenizer_id")
    if tok and tok != "server":
        return str(tok)
    return identity["model_id"] or o.get("model")


def _metadata(items: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"--metadata {item!r}: use KEY=VALUE")
        out[key.strip()] = value.strip()
    return out
