"""`tokenpace plan SWEEP`: safe watermark per replica, replicas for a peak, Little's-law check."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, NoReturn

import click
from rich.console import Console

from tokenpace.app.reports import report_files, sweep_records
from tokenpace.app.run.outputs import ExitStatus
from tokenpace.cli import parsing
from tokenpace.cli.bench.sweep_cmd import fraction, render_sweep

EXIT_BAD_INPUT = int(ExitStatus.REFUSED)


def load_sweep(path: Path, command: str) -> dict[str, Any]:
    """Read a sweep JSON or exit with one line saying why it cannot be used."""
    try:
        return report_files.load_sweep(path)
    except report_files.ReportError as exc:
        die(command, str(exc))


@click.command()
@click.argument("sweep_file", type=click.Path(path_type=Path), metavar="SWEEP")
@click.option("--peak-rps", type=float, help="Peak traffic (requests/s) the fleet must carry.")
@click.option("--headroom", default="30%", show_default=True, help="Headroom kept under the ceiling.")
@click.option("--slo", help="SLO for max goodput, e.g. ttft=500ms,tpot=50ms (default: the sweep's).")
@click.option(
    "--slo-percentile",
    type=click.Choice(["p50", "p90", "p95", "p99"]),
    help="Percentile that must meet the SLO (default: the sweep's, else p95).",
)
@click.option(
    "--max-error-rate",
    default="1%",
    show_default=True,
    help="Steps with more errors do not count as sustainable.",
)
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), help="Write the plan as JSON.")
def plan(**o: Any) -> None:
    """Plan capacity from a sweep: ceiling, safe watermark and replicas, with a Little's-law check."""
    try:
        headroom = fraction(o["headroom"], "headroom")
        max_err = fraction(o["max_error_rate"], "error rate")
        slo = parsing.slo(o["slo"]).to_dict() if o["slo"] else None
    except click.BadParameter as exc:
        die("plan", str(exc.message))
    if o["peak_rps"] is not None and o["peak_rps"] <= 0:
        die("plan", "--peak-rps must be positive")
    if not 0 <= headroom < 1:
        die("plan", "--headroom must be at least 0% and below 100%")
    doc = load_sweep(o["sweep_file"], "plan")
    try:
        notes = sweep_records.plan_from_sweep(
            o["sweep_file"], doc, slo, o["slo_percentile"], max_err, o["peak_rps"], headroom
        )
    except (KeyError, TypeError, ValueError) as exc:
        die("plan", f"{o['sweep_file']}: cannot analyse its steps ({exc})")
    console = Console()
    predicted = doc.get("predicted")
    if predicted:  # a simulator's sweep: never read as a measurement
        console.print(
            f"PREDICTED by the simulator from the {predicted.get('kind', 'profile')} "
            f"{predicted.get('profile', '?')}: no load was measured",
            style="bold magenta",
            highlight=False,
        )
    render_sweep(doc, console)
    for line in notes:
        console.print(line, style="dim", highlight=False)
    if o["peak_rps"] is None:
        console.print("give --peak-rps to size the fleet", style="dim")
    if o["out"]:
        try:
            report_files.write_plan(o["out"], o["sweep_file"], doc)
        except report_files.ReportError as exc:  # a device, a read-only folder: one line
            die("plan", str(exc))
        console.print(f"plan: {o['out']}")


def die(command: str, message: str) -> NoReturn:
    click.echo(f"tokenpace {command}: error: {message}", err=True)
    sys.exit(EXIT_BAD_INPUT)
