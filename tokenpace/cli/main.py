"""The `tokenpace` command: argument parsing and exit codes only; the work lives in tokenpace.app."""

from __future__ import annotations

import importlib

import click

from tokenpace import __version__

# Command name -> module defining it (attribute of the same name). Modules load only when their
# command runs, so `tokenpace bench` does not pay for the store's or the report's imports.
COMMANDS = {
    "bench": "tokenpace.cli.bench.bench_cmd",
    "sweep": "tokenpace.cli.bench.sweep_cmd",
    "plan": "tokenpace.cli.bench.plan_cmd",
    "report": "tokenpace.cli.bench.report_cmd",
    "runs": "tokenpace.cli.library.runs_cmd",
    "compare": "tokenpace.cli.library.compare_cmd",
    "check": "tokenpace.cli.library.check_cmd",
    "arms": "tokenpace.cli.gateway.arms_cmd",
    "history": "tokenpace.cli.library.history_cmd",
    "baseline": "tokenpace.cli.library.baseline_cmd",
    "ab": "tokenpace.cli.library.ab_cmd",
    "gateway": "tokenpace.cli.gateway.gateway_cmd",
    "sim": "tokenpace.cli.sim.sim_cmd",
    "scenarios": "tokenpace.cli.selection.scenarios_cmd",
    "select": "tokenpace.cli.selection.select_cmd",
    "ui": "tokenpace.cli.library.ui_cmd",
}


# What `tokenpace --help` lists, so that it imports no command (the store, numpy, the gateway):
# as quick as `tokenpace bench --help`. tests/cli/test_help.py keeps these in step with COMMANDS.
SUMMARIES = {
    "bench": "Benchmark an endpoint (default: the built-in simulated engine).",
    "sweep": "One bench run per load step, then the knee and a capacity plan.",
    "plan": "Capacity from a sweep: ceiling, safe watermark and replicas.",
    "report": "Report a result or a sweep: offline HTML, Markdown, CSV.",
    "runs": "List, show, label, delete, export and import stored runs.",
    "compare": "Compare run B with run A: difference, 95% CI, p-value, verdict.",
    "check": "Release gate: exit 1 when a metric regressed beyond its threshold.",
    "arms": "Gateway A/B arms: sample-ratio check, then promote or roll back.",
    "history": "A metric across stored runs, oldest first, and its level shifts.",
    "baseline": "Name runs as baselines (prod, v1.4-h100) for compare and check.",
    "ab": "Drift-controlled A/B: one seeded workload to A and B per block.",
    "gateway": "A measuring proxy: Prometheus metrics, records, A/B split.",
    "sim": "A simulated engine, on the wall clock or in virtual time.",
    "scenarios": "The scenarios: workload, load and SLO lines of each use case.",
    "select": "Judge candidates against a scenario; the cheapest that passes.",
    "ui": "A read-only web console over the run store (runs, compare, history).",
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        with formatter.section("Commands"):
            formatter.write_dl([(name, SUMMARIES[name]) for name in COMMANDS])

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        module = COMMANDS.get(cmd_name)
        if module is None:
            return None
        command: click.Command = getattr(importlib.import_module(module), cmd_name)
        return command


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="tokenpace")
def cli() -> None:
    """Measure how fast LLM services respond: TTFT, TPOT, ITL, E2E, throughput, goodput."""


def main() -> None:
    """Run the CLI; a usage error is one line that names the command (and the flag), exit 2."""
    try:
        code = cli.main(standalone_mode=False)
    except click.UsageError as exc:
        if type(exc).__name__ == "NoArgsIsHelpError" and exc.ctx:  # a group run bare: its help
            click.echo(exc.ctx.get_help(), err=True)
            raise SystemExit(2) from None
        name = exc.ctx.command_path if exc.ctx else "tokenpace"
        message = " ".join(exc.format_message().split())
        click.echo(f"{name}: error: {message} (see {name} --help)", err=True)
        raise SystemExit(2) from None
    except click.ClickException as exc:
        click.echo(f"tokenpace: error: {exc.format_message()}", err=True)
        raise SystemExit(exc.exit_code) from None
    except click.Abort:
        click.echo("tokenpace: aborted", err=True)
        raise SystemExit(130) from None
    raise SystemExit(code if isinstance(code, int) else 0)
