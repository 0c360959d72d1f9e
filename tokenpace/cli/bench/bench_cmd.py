"""`tokenpace bench`: flags in, one run, dashboard and files out."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, NoReturn

import click
from rich.console import Console

from tokenpace.app.jobs.bench_job import REFUSALS, BenchOutcome, run_bench_job
from tokenpace.app.jobs.repeat_job import run_repeated_bench
from tokenpace.app.run.bench_config import DEFAULT_CONCURRENCY, DEFAULT_REQUESTS, BenchConfig
from tokenpace.app.run.outputs import ExitStatus, RunOutputs
from tokenpace.app.run.run_info import too_short_for
from tokenpace.app.run.terms import (
    ARRIVALS,
    DIALECTS,
    EndpointError,
)
from tokenpace.cli.bench import workload_opts
from tokenpace.cli.bench.bench_options import bench_config, stdout_out
from tokenpace.cli.bench.dashboard import render
from tokenpace.cli.bench.gate_view import show_gate
from tokenpace.cli.bench.repeat_view import run_line, show_repeat_noise
from tokenpace.cli.bench.run_view import STORE_HELP, BenchProgress, print_saved
from tokenpace.cli.bench.until_view import run_auto, with_until_options
from tokenpace.cli.vllm import vllm_opts, vllm_target

EXIT_BAD_INPUT = int(ExitStatus.REFUSED)


class VllmArgs(click.Command):
    """Takes vLLM's several-values flags (``--goodput ttft:500 tpot:50``) as argparse does."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, vllm_target.expand_variadic(args))


@click.command(cls=VllmArgs)
@click.option(
    "--url",
    help="Base URL of an OpenAI-compatible API, e.g. http://127.0.0.1:8000/v1. "
    "Without it, tokenpace starts its simulated engine on 127.0.0.1 and measures that.",
)
@click.option(
    "--sim",
    "sim_profile",
    metavar="PROFILE",
    help="Benchmark this profile of the simulated engine (see `tokenpace sim --list-profiles`).",
)
@click.option("--model", help="Model name to request (default: the first one the server lists).")
@click.option(
    "--api",
    type=click.Choice(sorted(DIALECTS)),
    default="chat",
    show_default=True,
    help="API dialect: chat, completions, anthropic (/v1/messages), responses, embeddings, "
    "realtime (WebSocket) (see docs/dialects.md).",
)
@click.option("--api-key", envvar="OPENAI_API_KEY", help="Bearer token (or OPENAI_API_KEY).")
@click.option("--header", "headers", multiple=True, metavar="K:V", help="Extra request header.")
@click.option("--no-stream", is_flag=True, help="Ask for whole responses (TTFT then equals E2E).")
@click.option(
    "--concurrency",
    "-c",
    type=int,
    help=f"Closed loop: requests in flight at once (default {DEFAULT_CONCURRENCY}).",
)
@click.option("--rate", "-r", type=float, help="Open loop: requests per second.")
@click.option(
    "--arrival",
    type=click.Choice(ARRIVALS),
    default="poisson",
    show_default=True,
    help="Open-loop arrival process.",
)
@click.option(
    "--burstiness",
    type=float,
    default=1.0,
    show_default=True,
    help="Gamma arrival shape: 1 = Poisson, <1 burstier, >1 smoother.",
)
@click.option("--max-concurrency", type=int, help="Open loop: cap on requests in flight.")
@click.option(
    "--requests",
    "-n",
    type=int,
    help=f"Measured requests (default {DEFAULT_REQUESTS} unless --duration is given).",
)
@click.option("--duration", "duration", help="Stop sending after this long, e.g. 60s or 5m.")
@click.option(
    "--warmup",
    type=int,
    default=0,
    show_default=True,
    help="Requests sent first and left out of every number.",
)
@click.option("--timeout", "timeout", default="300s", show_default=True, help="Per-request timeout.")
@click.option(
    "--input-len",
    default="512",
    show_default=True,
    help="Prompt tokens: 512 | 256:1024 | normal:512,128 | lognormal:512,0.5 | 128,512,2048 | 128@3,2048@1.",
)
@click.option(
    "--output-len",
    default="128",
    show_default=True,
    help="Output tokens (max_tokens), same forms as --input-len.",
)
@click.option(
    "--ignore-eos",
    is_flag=True,
    help="Ask the engine to generate exactly the output length (ignore_eos, min_tokens).",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the workload and arrivals.")
@click.option(
    "--temperature",
    type=float,
    default=0.0,
    show_default=True,
    help="Sampling temperature sent with every request (recorded).",
)
@click.option(
    "--top-p",
    type=float,
    default=1.0,
    show_default=True,
    help="Nucleus sampling top_p sent with every request (recorded).",
)
@click.option("--slo", help="SLOs for goodput, e.g. ttft=500ms,tpot=50ms,e2e=10s.")
@click.option(
    "--fail-on",
    "fail_on",
    metavar="LINES",
    help='Absolute gates on this run\'s 95% intervals, e.g. "ttft.p95<500ms,tpot.p99<60ms,error_rate<1%" '
    "(also itl, e2e, .mean, throughput>N/s, goodput>N/s): exit 1 when an interval lies wholly beyond "
    "its line, 5 when one straddles it or the run is too short for it, 0 when all lie within "
    "(docs/exit-codes.md). A sweep judges every step.",
)
@click.option(
    "--percentiles",
    metavar="P,P,...",
    help="Percentiles shown, each with its 95% confidence interval, e.g. 50,90,99,99.9 "
    "(default P50, P90, P95, P99).",
)
@click.option(
    "--label",
    "labels",
    multiple=True,
    metavar="K=V",
    help="Label the run (engine, version, hardware, region, ...).",
)
@click.option(
    "--stall-tolerance",
    default="10%",
    show_default=True,
    envvar="TOKENPACE_STALL_TOLERANCE",
    show_envvar=True,
    help="Share of requests the client's own stalls may hold (over 3 ms each) before the run is NOT "
    "VALID (a stall that could move a headline percentile out of its 95% interval always is).",
)
@click.option("--request-id-prefix", help="Prefix of each x-request-id (default tp-RUNID-).")
@click.option(
    "--out",
    "out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Result JSON path; records go beside it as .records.jsonl (default results/TIME-RUNID.json). "
    "-: the result JSON on standard output (the dashboard on standard error).",
)
@click.option(
    "--server-metrics",
    default="auto",
    show_default=True,
    metavar="URL|auto|off",
    help="Scrape the engine's Prometheus metrics during the run (auto: the endpoint's own /metrics "
    "when it answers); vLLM, SGLang, TGI, llama.cpp and the simulator are understood.",
)
@click.option(
    "--server-metrics-interval", default="1s", show_default=True, help="Scrape interval (>= 100ms)."
)
@click.option(
    "--gpu-metrics",
    default="auto",
    show_default=True,
    metavar="URL|nvidia-smi|auto|off",
    help="Read the GPUs during the run: a dcgm-exporter URL, the local nvidia-smi, or auto (DCGM "
    "fields on the engine's /metrics, else nvidia-smi when the engine is on this host, else off).",
)
@click.option("--connect-probe", is_flag=True, help="Time a TCP connect to the endpoint every second.")
@click.option(
    "--new-connection-per-request",
    is_flag=True,
    help="Open a new connection for every request (measures connection set-up on purpose).",
)
@click.option(
    "--resend-unanswered",
    is_flag=True,
    help="Resend once a request that a reused connection dropped unanswered even when the server "
    "may have read it (default: only when its TCP provably never received it). Recorded as attempts.",
)
@click.option(
    "--otlp-endpoint",
    metavar="URL",
    help="Start a trace per request (W3C traceparent sent to the server) and export the client's span "
    "to this OTLP/HTTP traces URL (e.g. http://127.0.0.1:4318/v1/traces); the otlp extra.",
)
@click.option(
    "--otlp-sample",
    type=float,
    metavar="SHARE",
    help="Trace this share of the requests, in (0, 1] (default: all), chosen by a hash of --seed and "
    "each request's index: the rest still send traceparent, with the sampled flag 0, and export no span.",
)
@click.option("--insecure", is_flag=True, help="Do not verify the endpoint's TLS certificate.")
@click.option("--ca-cert", type=click.Path(exists=True, dir_okay=False), help="Trust this CA (PEM) for TLS.")
@click.option(
    "--workers",
    default="1",
    show_default=True,
    metavar="N|auto",
    help="Send the load from N worker processes (one schedule split between them, each pinned to a "
    "core); auto: as many as the asked rate needs, up to the cores.",
)
@click.option(
    "--ray",
    metavar="ADDRESS|auto",
    help="Run the workers as Ray actors on this Ray cluster (an optional extra: "
    "pip install 'tokenpace[ray]').",
)
@click.option(
    "--quiet", "-q", is_flag=True, help="No progress bar; with --repeat, a line per run, not its dashboard."
)
@click.option(
    "--repeat",
    default="1",
    show_default=True,
    metavar="K|auto",
    help="Run the same test K times (2-20) and store them as a repeat group: compare and check "
    "learn the noise between runs from it, and judge the group as one side. auto: only while the "
    "gate against --baseline is undecided (always-valid intervals), at most --max-runs.",
)
@with_until_options  # --baseline, --max-regression, --max-runs
@click.option("--store", "store_url", metavar="URL", help=STORE_HELP)  # run store (issue 5)
@click.option("--no-store", is_flag=True, help="Do not save the run in the run store.")
@workload_opts.workload_options  # --dataset, --lengths-from, --trace, --prefix-len, --turns, --tokenizer
@vllm_opts.vllm_options  # vLLM bench serve's names: --num-prompts, --request-rate, ..., --vllm-json
def bench(**opts: Any) -> None:
    """Benchmark an OpenAI-compatible streaming endpoint (default: the built-in simulated engine)."""
    to_stdout = stdout_out(opts)  # --out - : the result JSON on stdout, the dashboard on stderr
    console = Console(stderr=to_stdout)
    try:
        identity = vllm_opts.apply(opts)
        config = bench_config(opts)
        config.extra_body = vllm_opts.extra_body(opts)
        config.ready_check_timeout_s = opts["ready_check_timeout_sec"]
        vllm_export = vllm_opts.export(opts, identity)
    except (click.BadParameter, ValueError, EndpointError) as exc:
        _die(str(exc))
    for note in identity["notes"]:
        console.print(note, style="dim", highlight=False)
    outputs = RunOutputs(
        out=opts["out"], store_url=opts["store_url"], save=not opts["no_store"], **vllm_export
    )
    if config.fail_on and opts["repeat"] != "1":
        _die("--fail-on judges one run: drop --repeat (check --fail-on judges a stored run)")
    if config.fail_on and config.requests and (short := too_short_for(config, config.requests)):
        console.print(f"warning: {short}", style="yellow", highlight=False)  # before any load
    if opts["repeat"] == "auto":
        run_auto(config, outputs, opts, console, _die)
        return
    if not opts["repeat"].isdigit():
        _die(f"--repeat {opts['repeat']!r}: give a count (2-20) or auto")
    opts["repeat"] = int(opts["repeat"])
    if opts["repeat"] != 1:
        _repeat(config, outputs, opts, console)
        return
    try:
        outcome = run_bench_job(config, outputs, opts["sim_profile"], BenchProgress(console, opts["quiet"]))
    except (ValueError, *REFUSALS) as exc:  # a bad config is refused by the job, before any load
        _die(str(exc))
    result = outcome.result
    render(result.to_dict(), console)
    console.print(f"results: {outcome.out}  (records: {outcome.records_path})")
    if to_stdout and outcome.out is not None:
        sys.stdout.buffer.write(outcome.out.read_bytes().rstrip(b"\n") + b"\n")
        sys.stdout.flush()
    print_saved(console, outcome.saved, "bench", outcome.out)
    show_gate(console, result.fail_on)
    decision = outcome.exit_decision  # a run that did not measure what was asked: CI must see it
    if decision.code is not ExitStatus.OK:
        click.echo(f"tokenpace bench: {decision.reason} (exit {int(decision.code)})", err=True)
        sys.exit(int(decision.code))


def _repeat(config: BenchConfig, outputs: RunOutputs, opts: dict[str, Any], console: Console) -> None:
    def shown(k: int, outcome: BenchOutcome) -> None:
        if opts["quiet"]:  # a line per run; the noise table below says what the repeats found
            console.print(run_line(f"run {k + 1} of {opts['repeat']}", outcome), highlight=False)
            if outcome.saved is not None and not outcome.saved.ok:  # a store error is never hidden
                print_saved(console, outcome.saved, "bench", outcome.out)
            return
        console.rule(f"run {k + 1} of {opts['repeat']}")
        render(outcome.result.to_dict(), console)
        console.print(f"results: {outcome.out}  (records: {outcome.records_path})")
        print_saved(console, outcome.saved, "bench", outcome.out)

    try:
        progress = BenchProgress(console, opts["quiet"])
        group = run_repeated_bench(config, opts["repeat"], outputs, opts["sim_profile"], progress, shown)
    except (*REFUSALS, ValueError) as exc:
        _die(str(exc))
    show_repeat_noise(console, group)
    decision = group.exit_decision
    if decision.code is not ExitStatus.OK:
        click.echo(f"tokenpace bench: {decision.reason} (exit {int(decision.code)})", err=True)
        sys.exit(int(decision.code))


def _die(message: str) -> NoReturn:
    click.echo(f"tokenpace bench: error: {message}", err=True)
    sys.exit(EXIT_BAD_INPUT)
