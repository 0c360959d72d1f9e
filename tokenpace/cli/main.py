"""The `tokenpace` command: argument parsing and exit codes only; the work lives in tokenpace.app."""

from __future__ import annotations

import importlib

import click

from tokenpace import __version__

# Command name -> module defining it (attribute of the same name). Modules load only when their
# command runs, so `tokenpace bench` does not pay for the store's or the report's imports.
COMMANDS = {
    "bench": "tokenpace.cli.bench_cmd",
    "sweep": "tokenpace.cli.sweep_cmd",
    "plan": "tokenpace.cli.plan_cmd",
    "report": "tokenpace.cli.report_cmd",
    "runs": "tokenpace.cli.runs_cmd",
    "compare": "tokenpace.cli.compare_cmd",
    "check": "tokenpace.cli.check_cmd",
    "arms": "tokenpace.cli.arms_cmd",
    "history": "tokenpace.cli.history_cmd",
    "baseline": "tokenpace.cli.baseline_cmd",
    "ab": "tokenpace.cli.ab_cmd",
    "gateway": "tokenpace.cli.gateway_cmd",
    "sim": "tokenpace.cli.sim_cmd",
    "scenarios": "tokenpace.cli.scenarios_cmd",
    "select": "tokenpace.cli.select_cmd",
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        module = COMMANDS.get(cmd_name)
        if module is None:
            return None
        return getattr(importlib.import_module(module), cmd_name)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="tokenpace")
def cli() -> None:
    """Measure how fast LLM services respond: TTFT, TPOT, ITL, E2E, throughput, goodput."""


def main() -> None:
    cli()
