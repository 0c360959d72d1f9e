"""`tokenpace report RESULT_OR_SWEEP`: a self-contained HTML report, and Markdown/CSV exports."""

from __future__ import annotations

from pathlib import Path

import click

from tokenpace.app.baseline.store_ops import StoreError
from tokenpace.app.console.offline import write_offline_page
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
@click.argument("source", type=click.Path(path_type=Path), metavar="RESULT_OR_SWEEP", required=False)
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
@click.option(
    "--compare",
    "compare_refs",
    nargs=2,
    metavar="A B",
    help="With --html: two stored runs (or their repeat groups) compared, the web console's compare "
    "page as one offline file.",
)
@click.option(
    "--history",
    "history_ref",
    metavar="RUN",
    help="With --html: the test of this stored run over time, the web console's history page offline.",
)
@click.option("--metric", default="ttft.p95", show_default=True, help="With --history: the metric drawn.")
@click.option(
    "--arms",
    "arms_session",
    metavar="SESSION",
    help="With --html: a gateway session's arms over time and each rollout step's verdict, the web "
    "console's rollout page offline (guards: tokenpace arms --guard ... --html FILE).",
)
@click.option("--store", "store_url", metavar="URL", help="With --compare, --history, --arms: the store.")
def report(
    source: Path | None,
    html_out: Path | None,
    md_out: Path | None,
    csv_out: Path | None,
    title: str | None,
    percentiles: str | None,
    traces: Path | None,
    compare_refs: tuple[str, str] | None,
    history_ref: str | None,
    metric: str,
    arms_session: str | None,
    store_url: str | None,
) -> None:
    """Report a bench result or a sweep: offline HTML (--html), Markdown (--md), CSV (--csv).

    With no output option the Markdown goes to standard output. With --compare A B or --history RUN
    (and --html FILE), a page of the web console from the store, as one offline file.
    """
    if compare_refs or history_ref or arms_session:
        if arms_session and (compare_refs or history_ref):
            die("report", "--arms SESSION writes one page: give it alone with --html FILE")
        _store_page(source, html_out, md_out or csv_out, compare_refs, history_ref or arms_session, metric,
                    store_url, arms=arms_session is not None)  # fmt: skip
        return
    if source is None:
        die("report", "give a RESULT_OR_SWEEP file, or --compare A B / --history RUN with --html FILE")
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


def _store_page(
    source: Path | None,
    html_out: Path | None,
    other_out: Path | None,
    compare_refs: tuple[str, str] | None,
    history_ref: str | None,
    metric: str,
    store_url: str | None,
    arms: bool = False,
) -> None:
    if source is not None or other_out is not None or html_out is None or (compare_refs and history_ref):
        die("report", "--compare A B or --history RUN writes one page: give --html FILE and nothing else")
    if compare_refs:
        name, query = "compare", [("a", compare_refs[0]), ("b", compare_refs[1])]
    elif arms:
        name, query = "rollout", [("session", history_ref or "")]
    else:
        name, query = "history", [("run", history_ref or ""), ("metric", metric)]
    try:
        write_offline_page(store_url, name, query, html_out)
    except (StoreError, ValueError, OSError) as exc:
        die("report", str(exc))
    click.echo(f"html: {html_out}")
