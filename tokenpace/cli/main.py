"""The `tokenpace` command: argument parsing and exit codes only; the work lives in tokenpace.app."""

from __future__ import annotations

import click

from tokenpace import __version__
from tokenpace.cli.ab_cmd import ab
from tokenpace.cli.baseline_cmd import baseline
from tokenpace.cli.bench_cmd import bench
from tokenpace.cli.check_cmd import check
from tokenpace.cli.compare_cmd import compare
from tokenpace.cli.gateway_cmd import gateway
from tokenpace.cli.history_cmd import history
from tokenpace.cli.plan_cmd import plan
from tokenpace.cli.report_cmd import report
from tokenpace.cli.runs_cmd import runs
from tokenpace.cli.sim_cmd import sim
from tokenpace.cli.sweep_cmd import sweep


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="tokenpace")
def cli() -> None:
    """Measure how fast LLM services respond: TTFT, TPOT, ITL, E2E, throughput, goodput."""


cli.add_command(bench)
cli.add_command(sim)
cli.add_command(gateway)
cli.add_command(sweep)
cli.add_command(plan)
cli.add_command(report)
cli.add_command(runs)
cli.add_command(compare)
cli.add_command(check)
cli.add_command(history)
cli.add_command(baseline)
cli.add_command(ab)


def main() -> None:
    cli()
