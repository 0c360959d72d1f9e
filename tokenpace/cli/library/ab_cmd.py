"""`tokenpace ab --a URL_A --b URL_B`: paired blocks of the same workload, a verdict per metric."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click
from rich.console import Console

from tokenpace.app.jobs.ab_job import run_ab_job
from tokenpace.app.jobs.bench_job import REFUSALS
from tokenpace.app.rollout.ab import ORDERS, AbConfig, AbResult
from tokenpace.app.run.bench_config import BenchConfig, BenchResult
from tokenpace.app.run.outputs import ExitStatus
from tokenpace.app.run.terms import DIALECTS, EndpointError, Sampling, strip_credentials
from tokenpace.cli import parsing
from tokenpace.cli.bench.run_view import STORE_HELP
from tokenpace.cli.fit import show_table
from tokenpace.cli.library.analysis_view import (
    COMPARISON_OPTIONAL,
    comparison_table,
    print_rule,
    print_warnings,
)
from tokenpace.cli.library.store_opts import fail, parse_percent, parse_percentiles

_CAPTION = (
    "B - A: mean per-block difference (blocks are short runs: their spread is the noise between runs); "
    "detectable: the smallest worsening called 9 times in 10; p: sign-flip randomisation test; "
    "'all': the P50 verdict"
)


@click.command()
@click.option(
    "--a", "url_a", required=True, metavar="URL", help="Arm A: base URL of an OpenAI-compatible API."
)
@click.option("--b", "url_b", required=True, metavar="URL", help="Arm B: base URL.")
@click.option("--model", help="Model name for both arms (default: the first each server lists).")
@click.option(
    "--api",
    type=click.Choice(sorted(DIALECTS)),
    default="chat",
    show_default=True,
    help="API dialect: /v1/chat/completions or /v1/completions.",
)
@click.option("--api-key", envvar="OPENAI_API_KEY", help="Bearer token (or OPENAI_API_KEY).")
@click.option("--blocks", type=int, default=10, show_default=True, help="Blocks; each sends to A and to B.")
@click.option("--block-requests", type=int, default=20, show_default=True, help="Requests per arm and block.")
@click.option(
    "--concurrency",
    "-c",
    type=int,
    default=4,
    show_default=True,
    help="Requests in flight per arm (closed loop).",
)
@click.option("--order", type=click.Choice(ORDERS), default="alternate", show_default=True,
              help="alternate: AB, BA, AB ... (counterbalanced); random: seeded coin per block.")  # fmt: skip
@click.option(
    "--input-len",
    default="512",
    show_default=True,
    help="Prompt tokens, as bench: 512, 256:1024, lognormal:512,0.5, ...",
)
@click.option(
    "--output-len",
    default="128",
    show_default=True,
    help="Output tokens (max_tokens), same forms as --input-len.",
)
@click.option("--ignore-eos", is_flag=True, help="Ask the engine for exactly the output length.")
@click.option(
    "--temperature",
    type=float,
    default=0.0,
    show_default=True,
    help="Sampling temperature sent with every request.",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Block k uses workload seed SEED+k.")
@click.option("--timeout", default="300s", show_default=True, help="Per-request timeout.")
@click.option("--label", "labels", multiple=True, metavar="K=V", help="Label both arms' runs (repeatable).")
@click.option(
    "--alpha", type=float, default=0.05, show_default=True, help="Significance level of the verdicts."
)
@click.option(
    "--min-effect",
    default="5%",
    show_default=True,
    help="Practical threshold: slower/faster only when the whole interval lies beyond it.",
)
@click.option(
    "--percentiles", default="50,95,99", show_default=True, help="Percentiles compared, comma-separated."
)
@click.option(
    "--out", type=click.Path(dir_okay=False, path_type=Path), help="Write the A/B result JSON here."
)
@click.option("--store", "store_url", metavar="URL", help=STORE_HELP)
@click.option("--no-store", is_flag=True, help="Do not save the two arms in the run store.")
@click.option(
    "--workers", default="1", show_default=True, metavar="N|auto", help="Worker processes per arm (as bench)."
)
@click.option("--ray", metavar="ADDRESS|auto", help="Workers as Ray actors (as bench).")
@click.option("--quiet", "-q", is_flag=True, help="No per-block lines.")
def ab(**o: Any) -> None:
    """Send the same seeded workload to A and B in alternating blocks and compare them per block.

    Running A, then B an hour later, confounds drift of the machine with the difference measured;
    paired blocks cancel it. Each arm is stored as a run (<id>-a, <id>-b) unless --no-store.
    """
    try:
        config = _config(o)
    except (click.BadParameter, ValueError, EndpointError) as exc:
        fail("ab", exc.format_message() if isinstance(exc, click.BadParameter) else str(exc))
    console = Console()

    def on_block(k: int, arm: str, r: BenchResult) -> None:
        if not o["quiet"]:
            p50 = r.summary.ttft_ms.p50
            console.print(
                f"block {k + 1}/{config.blocks} arm {arm}: {r.summary.counts.get('ok', 0)} ok, "
                f"TTFT P50 {p50 if p50 is None else round(p50, 2)} ms",
                highlight=False,
            )

    try:
        outcome = run_ab_job(config, o["out"], o["store_url"], not o["no_store"], on_block)
    except (ValueError, *REFUSALS) as exc:  # a bad config is refused by the job, before any load
        fail("ab", str(exc))
    _print(console, outcome.result)
    for arm, report in outcome.saved.items():
        if report.ok:
            console.print(
                f"stored arm {arm.upper()} as run {report.run_id} ({report.records} records)", highlight=False
            )
        else:
            click.echo(f"tokenpace ab: error: could not store arm {arm.upper()}: {report.error}", err=True)
    if outcome.exit_status is not ExitStatus.OK:
        sys.exit(int(outcome.exit_status))


def _config(o: dict[str, Any]) -> AbConfig:
    base = BenchConfig(
        url="",
        model=o["model"],
        api=o["api"],
        concurrency=o["concurrency"],
        requests=o["block_requests"],
        timeout_s=parsing.duration_s(o["timeout"], "timeout"),
        input_len=parsing.length(o["input_len"]),
        output_len=parsing.length(o["output_len"]),
        seed=o["seed"],
        sampling=Sampling(o["temperature"], 1.0, o["ignore_eos"]),
        api_key=o["api_key"],
        labels=parsing.key_values(o["labels"], "=", "a label as KEY=VALUE"),
        workers=parsing.workers(o["workers"]),
        ray=o["ray"],
    )
    return AbConfig(
        o["url_a"],
        o["url_b"],
        base,
        blocks=o["blocks"],
        block_requests=o["block_requests"],
        order=o["order"],
        alpha=o["alpha"],
        min_effect=parse_percent(o["min_effect"], "--min-effect"),
        percentiles=tuple(parse_percentiles(o["percentiles"])),
    )


def _print(console: Console, result: AbResult) -> None:
    a = result.analysis
    if a is None:
        console.print("no complete block: nothing to compare", highlight=False)
    else:
        url_a, url_b = strip_credentials(result.config.url_a), strip_credentials(result.config.url_b)
        title = f"A/B {result.ab_id}: A = {url_a}  vs  B = {url_b}"
        show_table(
            console, comparison_table(a.comparison, title, caption=_CAPTION), optional=COMPARISON_OPTIONAL
        )
        deltas = a.block_deltas.get("ttft", {}).get("p50", [])
        shown = ", ".join("-" if d is None else f"{d:+.2f}" for d in deltas)
        console.print(
            f"TTFT P50 B - A per block (ms), order {' '.join(result.order)}: {shown}", highlight=False
        )
        console.print(f"[dim]Method: {a.comparison.method}[/]", highlight=False)
        print_rule(console, a.comparison.rule)
    print_warnings(console, result.warnings)
