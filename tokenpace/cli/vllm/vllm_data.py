"""`vllm bench serve`'s dataset flags on `tokenpace bench`: --dataset-name/--dataset-path and each
dataset's own flags, turned into tokenpace's workload options with vLLM's meaning (defaults too)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import click

DATASET_NAMES = (
    "random",
    "sharegpt",
    "sonnet",
    "custom",
    "burstgpt",
    "prefix_repetition",
    "random-mm",
    "hf",
    "spec_bench",
)
DATASETS_REFUSED = {
    "random-mm": "makes multimodal prompts (images, video); tokenpace sends text",
    "hf": "downloads a Hugging Face hub dataset; save it as JSONL and give --dataset FILE",
    "spec_bench": "reads the spec_bench question file; save its prompts as JSONL and use "
    "--dataset-name custom",
}
NEEDS_PATH = ("sharegpt", "sonnet", "custom", "burstgpt")
# vLLM's defaults, used when its dataset is asked for
RANDOM_DEFAULTS = {"random_input_len": 1024, "random_output_len": 128}
SONNET_DEFAULTS = {"sonnet_input_len": 550, "sonnet_output_len": 150, "sonnet_prefix_len": 200}
CUSTOM_OUTPUT_LEN = 256
PREFIX_REPETITION_DEFAULTS = {
    "prefix_repetition_prefix_len": 256,
    "prefix_repetition_suffix_len": 256,
    "prefix_repetition_num_prefixes": 10,
    "prefix_repetition_output_len": 128,
}
_RANDOM_KEYS = ("random_input_len", "random_output_len", "random_range_ratio", "random_prefix_len")

_TOKENS = click.IntRange(0, 1_048_576)
OPTIONS: list[Callable[[Callable[..., Any]], Callable[..., Any]]] = [
    click.option(
        "--dataset-name",
        type=click.Choice(DATASET_NAMES),
        help="vLLM: random (synthetic), sharegpt, sonnet, custom (JSONL of prompts), burstgpt "
        "(a length log), prefix_repetition.",
    ),
    click.option("--dataset-path", metavar="FILE", help="vLLM: the file of --dataset-name."),
    click.option(
        "--no-oversample", is_flag=True, help="vLLM: send each dataset prompt at most once (fewer requests)."
    ),
    click.option("--random-input-len", type=_TOKENS, help="vLLM random: prompt tokens (default 1024)."),
    click.option("--random-output-len", type=_TOKENS, help="vLLM random: output tokens (default 128)."),
    click.option(
        "--random-range-ratio",
        type=click.FloatRange(0, 1, max_open=True),
        help="vLLM random: lengths uniform in [len*(1-r), len*(1+r)].",
    ),
    click.option(
        "--random-prefix-len", type=_TOKENS, help="vLLM random: fixed prefix tokens shared by every prompt."
    ),
    click.option(
        "--sharegpt-output-len", type=_TOKENS, help="vLLM sharegpt: output tokens for every prompt."
    ),
    click.option("--custom-output-len", type=int, help="vLLM custom: output tokens (default 256)."),
    click.option(
        "--custom-skip-chat-template",
        is_flag=True,
        help="vLLM custom: send prompts as written (tokenpace always does; docs/vllm-reference.md).",
    ),
    click.option("--sonnet-input-len", type=_TOKENS, help="vLLM sonnet: prompt tokens (default 550)."),
    click.option("--sonnet-output-len", type=_TOKENS, help="vLLM sonnet: output tokens (default 150)."),
    click.option(
        "--sonnet-prefix-len", type=_TOKENS, help="vLLM sonnet: shared prefix tokens (default 200)."
    ),
    click.option(
        "--prefix-repetition-prefix-len", type=_TOKENS, help="vLLM prefix_repetition: prefix tokens."
    ),
    click.option(
        "--prefix-repetition-suffix-len", type=_TOKENS, help="vLLM prefix_repetition: tokens after it."
    ),
    click.option(
        "--prefix-repetition-num-prefixes", type=int, help="vLLM prefix_repetition: distinct prefixes."
    ),
    click.option(
        "--prefix-repetition-output-len", type=_TOKENS, help="vLLM prefix_repetition: output tokens."
    ),
]


def _given(key: str) -> bool:
    ctx = click.get_current_context(silent=True)
    return ctx is not None and ctx.get_parameter_source(key) is click.core.ParameterSource.COMMANDLINE


def _set_length(o: dict[str, Any], ours: str, value: str, theirs: str) -> None:
    if _given(ours) and o[ours] != value:
        raise click.BadParameter(f"--{ours.replace('_', '-')} and {theirs} say different things: give one")
    o[ours] = value


def _spread(length: int, ratio: float) -> str:
    """vLLM's random lengths: uniform integers in [floor(n*(1-r)), ceil(n*(1+r))]."""
    if not ratio:
        return str(max(length, 1))
    return f"{max(math.floor(length * (1 - ratio)), 1)}:{max(math.ceil(length * (1 + ratio)), 1)}"


def apply_dataset(o: dict[str, Any]) -> None:
    """Map --dataset-name and its flags onto tokenpace's workload options (in place)."""
    name = o.get("dataset_name")
    if name is None and any(o.get(k) is not None for k in _RANDOM_KEYS):
        name = "random"  # vLLM's default dataset
    if name is None:
        if o.get("dataset_path"):
            raise click.BadParameter(
                "--dataset-path needs --dataset-name (sharegpt, sonnet, custom, burstgpt)"
            )
        return
    if name in DATASETS_REFUSED:
        raise click.BadParameter(f"--dataset-name {name}: {DATASETS_REFUSED[name]}")
    path = o.get("dataset_path")
    if name in NEEDS_PATH:
        if not path:
            raise click.BadParameter(f"--dataset-name {name} needs --dataset-path FILE")
        taken = [f"--{k.replace('_', '-')}" for k in ("dataset", "lengths_from", "trace") if o.get(k)]
        if taken:
            raise click.BadParameter(f"--dataset-path and {taken[0]} each choose the prompts: give one")
    elif path:
        raise click.BadParameter(f"--dataset-name {name} reads no file: drop --dataset-path")
    {
        "random": _random,
        "sharegpt": _sharegpt,
        "sonnet": _sonnet,
        "custom": _custom,
        "burstgpt": _burstgpt,
        "prefix_repetition": _prefix_repetition,
    }[name](o)


def _random(o: dict[str, Any]) -> None:
    ratio = o.get("random_range_ratio") or 0.0
    for key, ours in (("random_input_len", "input_len"), ("random_output_len", "output_len")):
        if o.get(key) is not None or not _given(ours):
            given = o.get(key)
            n = int(given) if given is not None else RANDOM_DEFAULTS[key]
            _set_length(o, ours, _spread(n, ratio), "--" + key.replace("_", "-"))
    if o.get("random_prefix_len"):
        _prefix(o, o["random_prefix_len"], 1, "--random-prefix-len")


def _prefix(o: dict[str, Any], tokens: int, count: int, flag: str) -> None:
    if o.get("prefix_len") is not None and o["prefix_len"] != tokens:
        raise click.BadParameter(f"--prefix-len and {flag} say different things: give one")
    o["prefix_len"] = tokens
    o["prefixes"] = count


def _sharegpt(o: dict[str, Any]) -> None:
    o["dataset"], o["dataset_format"] = o["dataset_path"], "sharegpt"
    if o.get("sharegpt_output_len"):
        o["dataset_output_len"] = o["sharegpt_output_len"]


def _custom(o: dict[str, Any]) -> None:
    o["dataset"], o["dataset_format"] = o["dataset_path"], "prompts"
    n = o.get("custom_output_len")
    o["dataset_output_len"] = CUSTOM_OUTPUT_LEN if n is None else n
    if o["dataset_output_len"] == -1:  # vLLM: -1 keeps each prompt's own output length
        o["dataset_output_len"] = None
    elif o["dataset_output_len"] < 1:
        raise click.BadParameter("--custom-output-len: a number of tokens, or -1 (each prompt's own)")


def _sonnet(o: dict[str, Any]) -> None:
    values = {k: o[k] if o.get(k) is not None else v for k, v in SONNET_DEFAULTS.items()}
    if values["sonnet_prefix_len"] > values["sonnet_input_len"]:
        raise click.BadParameter("--sonnet-prefix-len must not exceed --sonnet-input-len")
    o["sonnet"] = {
        "path": o["dataset_path"],
        "input_len": values["sonnet_input_len"],
        "output_len": values["sonnet_output_len"],
        "prefix_len": values["sonnet_prefix_len"],
    }


def _burstgpt(o: dict[str, Any]) -> None:
    o["lengths_from"] = o["dataset_path"]


def _prefix_repetition(o: dict[str, Any]) -> None:
    v = {k: o[k] if o.get(k) is not None else d for k, d in PREFIX_REPETITION_DEFAULTS.items()}
    if v["prefix_repetition_num_prefixes"] < 1 or v["prefix_repetition_prefix_len"] < 1:
        raise click.BadParameter("--prefix-repetition-prefix-len and -num-prefixes must be at least 1")
    _set_length(
        o, "input_len", str(max(v["prefix_repetition_suffix_len"], 1)), "--prefix-repetition-suffix-len"
    )
    _set_length(
        o, "output_len", str(max(v["prefix_repetition_output_len"], 1)), "--prefix-repetition-output-len"
    )
    _prefix(
        o,
        v["prefix_repetition_prefix_len"],
        v["prefix_repetition_num_prefixes"],
        "--prefix-repetition-prefix-len",
    )
