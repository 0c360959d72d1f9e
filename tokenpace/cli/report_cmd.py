"""`tokenpace report RESULT_OR_SWEEP`: a self-contained HTML report, and Markdown/CSV exports."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from tokenpace.adapters.report.exports import to_csv, to_markdown
from tokenpace.adapters.report.figures import Step, make_steps
from tokenpace.adapters.report.html import render_html
from tokenpace.adapters.report.tables import is_sweep
from tokenpace.adapters.results import read_records, read_result
from tokenpace.adapters.safe_files import check_output, write_atomic
from tokenpace.cli.plan_cmd import die
from tokenpace.core.asked_percentiles import asked_percentiles, parse_percentiles
from tokenpace.core.record import RequestRecord


def _records(base: Path, result: dict[str, Any]) -> list[RequestRecord]:
    name = (result.get("records") or {}).get("path")
    if not name:
        return []
    path = base / name
    try:
        return read_records(path)
    except FileNotFoundError:
        click.echo(f"tokenpace report: note: {path} not found; charts of records left empty", err=True)
    except (OSError, ValueError, TypeError) as exc:
        click.echo(f"tokenpace report: note: {path} unreadable ({exc}); left out", err=True)
    return []


def load_report(path: Path) -> tuple[dict[str, Any], list[Step]]:
    try:
        doc = read_result(path)
    except FileNotFoundError:
        die("report", f"{path}: no such file")
    except (OSError, ValueError) as exc:
        die("report", f"{path}: not a tokenpace JSON file ({str(exc).splitlines()[0]})")
    if not isinstance(doc, dict):
        die("report", f"{path}: not a tokenpace result or sweep")
    if is_sweep(doc):
        results = doc.get("steps") or []
        if not results:
            die("report", f"{path}: the sweep has no finished steps")
    elif "summary" in doc and "conditions" in doc:
        results = [doc]
    else:
        die("report", f"{path}: not a tokenpace result or sweep (no summary or steps)")
    try:
        return doc, make_steps(results, [_records(path.parent, r) for r in results])
    except (KeyError, TypeError) as exc:
        die("report", f"{path}: malformed result ({exc})")


def _recompute_percentiles(steps: list[Step], text: str) -> None:
    """--percentiles: each run's asked percentiles and intervals, from its records."""
    try:
        asked = parse_percentiles(text)
    except ValueError as exc:
        die("report", str(exc))
    for step in steps:
        if not step.records:
            die("report", "--percentiles needs each run's records (RESULT.records.jsonl beside it)")
        step.result["summary"]["percentiles"] = asked_percentiles(step.records, asked)


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
def report(
    source: Path,
    html_out: Path | None,
    md_out: Path | None,
    csv_out: Path | None,
    title: str | None,
    percentiles: str | None,
) -> None:
    """Report a bench result or a sweep: offline HTML (--html), Markdown (--md), CSV (--csv).

    With no output option the Markdown goes to standard output.
    """
    doc, steps = load_report(source)
    if percentiles is not None:
        _recompute_percentiles(steps, percentiles)
    try:
        for flag, path in (("--html", html_out), ("--md", md_out), ("--csv", csv_out)):
            if path:
                check_output(path, flag)  # all of them before writing any
        if html_out:
            write_atomic(html_out, render_html(doc, steps, title).encode())
            click.echo(f"html: {html_out}")
        if md_out:
            write_atomic(md_out, to_markdown(doc).encode())
            click.echo(f"markdown: {md_out}")
        if csv_out:
            write_atomic(csv_out, to_csv(doc).encode())
            click.echo(f"csv: {csv_out}")
    except OSError as exc:
        die("report", str(exc))
    except (KeyError, TypeError) as exc:
        die("report", f"{source}: malformed result ({exc})")
    if not (html_out or md_out or csv_out):
        click.echo(to_markdown(doc), nl=False)
