"""The `tokenpace` command: argument parsing and exit codes only; the work lives in tokenpace.app."""

from __future__ import annotations

import click

from tokenpace import __version__
from tokenpace.cli.bench_cmd import bench
from tokenpace.cli.sim_cmd import sim


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="tokenpace")
def cli() -> None:
    """Measure how fast LLM services respond: TTFT, TPOT, ITL, E2E, throughput, goodput."""


cli.add_command(bench)
cli.add_command(sim)


def main() -> None:
    cli()
