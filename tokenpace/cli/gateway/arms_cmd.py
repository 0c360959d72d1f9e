"""`tokenpace arms --since 1h --guard ttft.p95=+10%,error_rate=+0.5pp`: a gray release judged."""

from __future__ import annotations

import sys
from pathlib import Path

import click
import orjson
from rich.console import Console

from tokenpace.app.rollout.arms import arms_report
from tokenpace.app.rollout.terms import parse_guards
from tokenpace.cli.gateway.arms_view import render, verdict_line, verdict_style
from tokenpace.cli.library.store_opts import (
    bootstrap_options,
    guarded,
    open_or_fail,
    parse_when,
    store_option,
    write_report,
)


@click.command()
@click.option(
    "--since", default="1h", show_default=True, help="Window start: 1h, 30m, 7d or 2026-12-01[T10:00]."
)
@click.option("--until", default=None, help="Window end (default: now).")
@click.option(
    "--guard", "guard", metavar="NAME=+X%|+Xpp,...", help="Guard rails, e.g. ttft.p95=+10%,complaint=+0pp."
)
@click.option(
    "--reference", metavar="ARM", help="The arm the others are judged against (default: the first)."
)
@click.option("--session", metavar="ID", help="Only this gateway session (printed when the gateway starts).")
@click.option("--alpha", type=float, default=0.05, show_default=True, help="1 - confidence of the intervals.")
@bootstrap_options  # --resamples, --seed
@click.option("--json", "as_json", is_flag=True, help="The report as JSON on stdout.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), help="The report as JSON in FILE.")
@store_option
@guarded("arms")
def arms(
    since: str,
    until: str | None,
    guard: str | None,
    reference: str | None,
    session: str | None,
    alpha: float,
    resamples: int,
    seed: int,
    as_json: bool,
    out: Path | None,
    store_url: str | None,
) -> None:
    """Per arm of the gateway's split: requests, users, latency, errors and business events, the
    sample-ratio check first, and one verdict. Exit 0 promote, 1 roll back, 2 hold (a broken split,
    too little traffic, a guard whose interval straddles its limit) or bad input."""
    guards = parse_guards(guard) if guard else []
    if not 0 < alpha < 1:
        raise ValueError("--alpha must be between 0 and 1")
    if resamples < 10:
        raise ValueError("--resamples must be at least 10")
    start = parse_when(since)
    assert start is not None
    store = open_or_fail("arms", store_url)
    _window, report = arms_report(
        store, start, parse_when(until), guards, reference, session, alpha, resamples, seed
    )
    if out:
        write_report(out, report.to_dict())
    if as_json:
        click.echo(orjson.dumps(report.to_dict(), option=orjson.OPT_INDENT_2).decode())
    else:
        console = Console()
        render(console, report, since)
        console.print(verdict_line(report), style=verdict_style(report), highlight=False)
    sys.exit(report.exit_code)
