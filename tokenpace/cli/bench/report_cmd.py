"""`tokenpace report RESULT_OR_SWEEP`: a self-contained HTML report, and Markdown/CSV exports."""

from __future__ import annotations

from pathlib import Path

import click

from tokenpace.app.reports.report_files import (
    ReportError,
    load_report,
    markdown,
    recompute_percentiles,
    write_reports,
)
from tokenpace.cli.bench.plan_cmd import die


def _note(text: str) -> None:
    click.echo(f"tokenpace report: note: {text}", err=True)


@click.command()
@click.argument("source", type=click.Path(path_type=Path), metavar="RESULT_OR_SWEEP")
@click.option("--html", "html_out", type=click.Path(dir_okay=False, path_type=Path), help="HTML report.")
@click.option("--md", "md_out", type=click.Path(dir_okay=False, path_type=Path), help="Markdown tables.")
@click.option("--csv", "csv_out", type=click.Path(dir_okay=False, path_type=Path), help="CSV table.")
@click.option("--title", help="Report title.")
@click.option(
    "--percentiles",
    metavar="P,P,...",
    help="Percentiles shown, each with its 95% interval, e.g. 50,90,99,99.9 (from the records beside "
    "the result; default: the run's own).",
)
@click.option(
    "--traces",
    type=click.Path(path_type=Path),
    metavar="FILE",
    help="With --html: where the TTFT P95+ requests' time went, hop by hop, from this trace file (JSON "
    "lines: OTLP JSON or tokenpace's span lines) joined by trace id (bench --otlp-endpoint).",
)
def report(
    source: Path,
    html_out: Path | None,
    md_out: Path | None,
    csv_out: Path | None,
    title: str | None,
    percentiles: str | None,
    traces: Path | None,
) -> None:
    """Report a bench result or a sweep: offline HTML (--html), Markdown (--md), CSV (--csv).

    With no output option the Markdown goes to standard output.
    """
    outputs = {"--html": html_out, "--md": md_out, "--csv": csv_out}
    if traces is not None and html_out is None:
        die("report", "--traces adds a section to the HTML report: give --html FILE too")
    try:
        doc, steps = load_report(source, _note)
        if percentiles is not None:
            recompute_percentiles(steps, percentiles)
        write_reports(source, doc, steps, outputs, title, click.echo, traces)
    except ReportError as exc:
        die("report", str(exc))
    if not (html_out or md_out or csv_out):
        click.echo(markdown(doc), nl=False)
