"""Workload flags of `tokenpace bench` (and so of `sweep`): datasets, log lengths, traces, shared
prefixes, multi-turn sessions and tokenizers. Files are read and checked here, before any load."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import click

from tokenpace.app.baseline.replay_source import keep_api, load_trace
from tokenpace.app.run.files import DATASET_FORMATS, load_dataset, read_length_pairs, sonnet_entries
from tokenpace.app.run.workloads import TRACE_ARRIVAL, WorkloadOptions
from tokenpace.cli import parsing

FILE = click.Path(dir_okay=False, path_type=Path)
DEFAULT_SONNET_PROMPTS = 1000  # sonnet prompts made for a run bounded by --duration only

OPTIONS: list[Callable[[Callable[..., Any]], Callable[..., Any]]] = [
    click.option(
        "--dataset",
        type=FILE,
        help="Prompts from a file: JSONL of {prompt}, ShareGPT, or OpenAI messages logs.",
    ),
    click.option(
        "--dataset-format",
        type=click.Choice(DATASET_FORMATS),
        default="auto",
        show_default=True,
        help="Format of --dataset (auto: told from the first record).",
    ),
    click.option(
        "--lengths-from",
        type=FILE,
        metavar="LOG",
        help="Sample (input, output) length pairs from a request log (JSONL/CSV with usage counts).",
    ),
    click.option(
        "--trace",
        metavar="FILE|store:REF",
        help="Replay a trace on its clock: CSV/JSONL (timestamp, input, output tokens), request records "
        "(the gateway's --records, a bench run's), or stored runs (store:RUN, store:key=value).",
    ),
    click.option(
        "--trace-window",
        metavar="FROM:TO",
        help="Replay only the requests that arrived in this window from the trace's start (e.g. 10m:70m).",
    ),
    click.option(
        "--speedup", type=float, default=1.0, show_default=True, help="Trace replay speed-up factor."
    ),
    click.option(
        "--trace-time-unit",
        type=click.Choice(["auto", "s", "ms", "us"]),
        default="auto",
        show_default=True,
        help="Unit of numeric trace timestamps (auto: ms for Mooncake traces, else s).",
    ),
    click.option(
        "--block-tokens",
        type=int,
        help="Tokens per trace hash id [default: 512, Mooncake's block size; for request records, "
        "the tokens in 2048 characters of their prompts].",
    ),
    click.option(
        "--trace-template-tokens",
        type=int,
        metavar="K",
        help="With --trace of request records whose chat template cannot be estimated from them "
        "(conditions.workload.template_tokens unknown): the tokens it added to each captured prompt, "
        "taken off so each prompt is sent as long as it was.",
    ),
    click.option("--prefix-len", type=int, help="Shared prefix tokens at the start of each request."),
    click.option(
        "--prefixes", type=int, default=1, show_default=True, help="Number of distinct shared prefixes."
    ),
    click.option("--turns", type=int, default=1, show_default=True, help="Turns per multi-turn session."),
    click.option("--think-time", default="0s", show_default=True, help="Pause between a session's turns."),
    click.option(
        "--prompt-salt",
        default=None,
        metavar="auto|none|KEY",
        help="Start every prompt with a few tokens of salt, new for each run (auto), so no run is "
        "measured warm on prompts an earlier run left in the engine's prefix cache; none sends "
        "identical prompts for a seed (to measure a warm cache on purpose); KEY reuses a fixed salt. "
        "[default: auto; none with --trace, which sends the captured lengths]",
    ),
    click.option(
        "--tokenizer",
        metavar="PATH|server",
        help="Count tokens with a local tokenizer.json (or model folder), or the server's /tokenize.",
    ),
]


def workload_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed(OPTIONS):
        fn = option(fn)
    return fn


def options_from(o: dict[str, Any]) -> WorkloadOptions:
    """Read every file named by the flags; DatasetError/TokenizerError (ValueErrors) on bad input."""
    parsing.check_numbers(o, parsing.WORKLOAD_BOUNDS)
    sources = [f"--{k.replace('_', '-')}" for k in ("dataset", "lengths_from", "trace") if o.get(k)]
    if len(sources) > 1:
        raise ValueError(f"{' and '.join(sources)} each choose the prompts: give one")
    opts = WorkloadOptions(
        speedup=o.get("speedup") or 1.0,
        block_tokens=o.get("block_tokens") or 512,
        trace_window=o.get("trace_window"),
        prefix_len=o.get("prefix_len"),
        prefixes=o.get("prefixes") or 1,
        turns=o.get("turns") or 1,
        think_time_s=parsing.duration_s(o.get("think_time") or "0s", "think time"),
    )
    opts.validate()
    tok = o.get("tokenizer")
    if tok == "server":
        opts.server_tokenizer = True
    elif tok:
        from tokenpace.app.run.files import load_tokenizer

        opts.counter = load_tokenizer(tok)
    if o.get("dataset"):
        opts.dataset, opts.source = load_dataset(o["dataset"], o.get("dataset_format") or "auto")
        if o.get("dataset_output_len"):  # vLLM's --sharegpt-output-len / --custom-output-len
            opts.dataset = [replace(e, output_len=o["dataset_output_len"]) for e in opts.dataset]
    if o.get("sonnet"):  # vLLM's --dataset-name sonnet (cli.vllm_data)
        s = o["sonnet"]
        count = o.get("requests") or DEFAULT_SONNET_PROMPTS
        opts.dataset, opts.source = sonnet_entries(
            s["path"],
            count,
            s["input_len"],
            s["output_len"],
            s["prefix_len"],
            o.get("seed") or 0,
            opts.counter,
        )
    if o.get("lengths_from"):
        opts.length_pairs, opts.source = read_length_pairs(o["lengths_from"])
    if o.get("trace"):
        _read_trace(opts, o)
    elif o.get("trace_template_tokens") is not None:
        raise ValueError("--trace-template-tokens is for --trace of request records")
    opts.validate()
    return opts


def _read_trace(opts: WorkloadOptions, o: dict[str, Any]) -> None:
    load_trace(
        opts,
        str(o["trace"]),
        o.get("store_url"),
        o.get("trace_time_unit") or "auto",
        o.get("block_tokens"),
        lambda t: parsing.duration_s(t, "--trace-window"),
        o.get("trace_template_tokens"),
    )


def apply(config: Any, o: dict[str, Any]) -> Any:
    """The bench config with the workload flags applied; a trace sets the load (its own clock)."""
    opts = options_from(o)
    # a replay sends the lengths it captured: no salt on top unless asked for
    salt = o.get("prompt_salt") or ("none" if opts.trace is not None else "auto")
    if not salt.strip() or any(not c.isprintable() for c in salt):
        raise click.BadParameter("--prompt-salt: give auto, none or a printable key")
    config = replace(config, prompt_salt=salt)
    if opts.trace is not None:
        if "concurrency_steps" in o:
            raise click.BadParameter("--trace replays on its own clock: use `tokenpace bench`, not sweep")
        if o.get("rate") is not None or o.get("concurrency") is not None:
            raise click.BadParameter(
                "--trace replays on its own clock: drop --rate/--concurrency (use --speedup)"
            )
        try:
            keep_api(opts, config.api)
        except ValueError as exc:
            raise click.BadParameter(str(exc)) from None
        requests = config.requests
        if o.get("requests") is None and o.get("duration") is None:
            requests = max(1, len(opts.trace) - config.warmup)
        return replace(
            config,
            rate=opts.trace_rate(),
            concurrency=None,
            arrival=TRACE_ARRIVAL,
            requests=requests,
            workload_opts=opts,
        )
    if o.get("no_oversample") and opts.dataset is not None and config.requests is not None:
        config = replace(config, requests=min(config.requests, len(opts.dataset)))  # vLLM's meaning
    return replace(config, workload_opts=opts)
