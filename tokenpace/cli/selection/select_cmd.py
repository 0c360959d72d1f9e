"""`tokenpace select --scenario NAME CANDIDATE...`: which stored candidates meet a scenario's lines,
at what cost, and which one to pick."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import click
import orjson
from rich.console import Console
from rich.table import Table

from tokenpace.app.run.outputs import ExitStatus, worst
from tokenpace.app.selection.select import (
    SelectConfig,
    SelectReport,
    needs_store,
    run_select,
    write_select_html,
)
from tokenpace.app.selection.terms import Cost, Prices
from tokenpace.cli.fit import show_table
from tokenpace.cli.library.store_opts import guarded, open_or_fail, store_option, write_report

_MARK = {
    "pass": "[green]PASS[/green]",
    "fail": "[red]FAIL[/red]",
    "undecided": "[yellow]UNDECIDED[/yellow]",
    "unknown": "[yellow]??[/yellow]",
}


def _named_prices(items: tuple[str, ...], flag: str) -> dict[str, Prices]:
    out = {}
    for item in items:
        name, sep, value = item.rpartition("=")
        if not sep or not name:
            raise ValueError(f"{flag} {item!r}: use NAME=PRICE (NAME: a candidate as typed, or a model)")
        try:
            if flag == "--hourly":
                out[name] = Prices(hourly=float(value))
            else:
                inp, _, outp = value.partition("/")
                out[name] = Prices(input_per_mtok=float(inp), output_per_mtok=float(outp or 0))
        except ValueError:
            raise ValueError(f"{flag} {item!r}: {value!r} is not a price") from None
        if any(v is not None and v < 0 for v in out[name].to_dict().values()):
            raise ValueError(f"{flag} {item!r}: prices cannot be negative")
    return out


@click.command()
@click.argument("candidates", nargs=-1, metavar="[CANDIDATE]...")
@click.option(
    "--scenario",
    "scenario_names",
    required=True,
    multiple=True,
    help="Scenario to judge against (see `tokenpace scenarios`); repeat for several.",
)
@click.option(
    "--where",
    "wheres",
    multiple=True,
    metavar="K=V[,K=V]",
    help="A candidate by label query: the newest matching run, or its whole sweep. Repeatable.",
)
@click.option(
    "--scenarios",
    "scenarios_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Your scenario file (TOML), added to the defaults.",
)
@click.option(
    "--price",
    "api_prices",
    multiple=True,
    metavar="NAME=IN/OUT",
    help="API price of a candidate (or model): $ per million input / output tokens.",
)
@click.option(
    "--hourly",
    "hourly_prices",
    multiple=True,
    metavar="NAME=USD",
    help="Hardware price of a candidate (or model) per hour; divided by its measured goodput.",
)
@click.option(
    "--route-small", metavar="CANDIDATE", help="Tiered routing: the candidate taking simple requests."
)
@click.option(
    "--route-share",
    type=float,
    default=0.5,
    show_default=True,
    help="Tiered routing: share of requests sent to --route-small.",
)
@click.option(
    "--input-fit",
    "input_fits",
    multiple=True,
    metavar="CANDIDATE=SWEEP_ID",
    help="Move a candidate's TTFT and E2E to the scenario's input length by the prefill fit of a "
    "stored input-length sweep (sweep --input-len 512,1024,2048).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), help="Also write the JSON here.")
@click.option(
    "--html",
    "html_out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write a report: per scenario, the matrix, candidates against the line, cost vs latency.",
)
@store_option
@guarded("select")
def select(
    candidates: tuple[str, ...],
    scenario_names: tuple[str, ...],
    wheres: tuple[str, ...],
    scenarios_file: Path | None,
    api_prices: tuple[str, ...],
    hourly_prices: tuple[str, ...],
    route_small: str | None,
    route_share: float,
    input_fits: tuple[str, ...],
    as_json: bool,
    out: Path | None,
    html_out: Path | None,
    store_url: str | None,
) -> None:
    """Judge candidates (run ids, sweep ids, KEY=VALUE run references, --where queries) against a
    scenario: a line passes only when its percentile's 95% upper bound is under it at the
    scenario's load. Costs each priced candidate and recommends the cheapest that passes. Exit 0
    when a candidate passes (every scenario asked), 1 when every measured candidate fails, 5 when
    none passes but some is undecided, 2 on bad input."""
    prices = _named_prices(api_prices, "--price") | _named_prices(hourly_prices, "--hourly")
    fits = {}
    for item in input_fits:
        name, sep, sweep_id = item.rpartition("=")
        if not sep or not name or not sweep_id:
            raise ValueError(f"--input-fit {item!r}: use CANDIDATE=SWEEP_ID")
        fits[name] = sweep_id
    # a selection of predicted sweep files alone reads no store (a profile before any measurement)
    store = open_or_fail("select", store_url) if needs_store(list(candidates), list(wheres)) else None
    base = SelectConfig(
        "", list(candidates), list(wheres), scenarios_file, prices, fits, route_small, route_share
    )
    reports = [run_select(store, dataclasses.replace(base, scenario=name)) for name in scenario_names]
    docs = [r.to_dict() for r in reports]
    doc = docs[0] if len(docs) == 1 else {"scenarios": docs}
    if out:
        write_report(out, doc)
    if html_out:
        write_select_html(html_out, docs)
    code = worst([r.exit_code for r in reports])
    if as_json:
        click.echo(orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode())
    else:
        console = Console()
        for report in reports:
            render(report, console)
        if html_out:
            console.print(f"report: {html_out}")
    if code is not ExitStatus.OK:  # no candidate passes: a pipeline picking one must see it
        lines = "; ".join(r.outcome_line() for r in reports if r.exit_code is not ExitStatus.OK)
        click.echo(f"tokenpace select: {lines} (exit {int(code)})", err=True)
        sys.exit(int(code))


def _cost_text(c: Cost | str | None) -> str:
    if c is None:
        return "no price"
    if isinstance(c, str):
        return c
    mtok = f", ${c.per_mtok_output:.4g} per million output tokens" if c.per_mtok_output is not None else ""
    return f"${c.per_k_requests:.4g} per 1k requests{mtok} ({c.basis})"


def _short(status: str, value: float | None, upper: float | None) -> str:
    shown = upper if upper is not None else value
    if shown is None:
        return _MARK[status]
    if upper is None and shown <= 1:  # a share (errors, attainment)
        return f"{_MARK[status]} {shown:.0%}"
    return f"{_MARK[status]} {shown:.4g}"


def _matrix(report: SelectReport, predicted: bool, console: Console, title: str | None) -> None:
    """The measured candidates' matrix, or the predicted ones'."""
    table = Table(show_lines=False, title=title, title_justify="left")
    table.add_column("candidate", overflow="fold")
    for n, cell in enumerate(report.verdicts[0].cells, 1):
        table.add_column(f"({n}) {cell.line}", overflow="fold")
    table.add_column("verdict")
    table.add_column("$/1k req")
    for v in (v for v in report.verdicts if (v.kind == "predicted") == predicted):
        cost = report.costs.get(v.candidate)
        price = f"{cost.per_k_requests:.4g}" if isinstance(cost, Cost) else "-"
        cells = [_short(c.status, c.value, c.upper) for c in v.cells]
        verdict = _MARK[v.status] + (" PREDICTED" if v.kind == "predicted" else "")
        table.add_row(f"{v.candidate} ({v.kind})", *cells, verdict, price)
    show_table(console, table)


def render(report: SelectReport, console: Console) -> None:
    """The matrix (each latency cell shows its 95% upper bound in ms), then the reason per cell.
    Predicted candidates get a table of their own, after the measured ones, and never the
    recommendation."""
    s = report.scenario
    console.print(f"[bold]{s.name}[/bold]: {s.input_len} in / {s.output_len} out tokens at {s.load_label()}")
    measured = [v for v in report.verdicts if v.kind != "predicted"]
    predicted = [v for v in report.verdicts if v.kind == "predicted"]
    if measured:
        _matrix(report, False, console, "measured" if predicted else None)
    if predicted:
        _matrix(report, True, console, "PREDICTED by the simulator (not measured)")
    for v in report.verdicts:
        console.print(f"[bold]{v.candidate}[/bold]: {v.placement.where}", highlight=False)
        if v.candidate in report.predicted:
            console.print(f"  {report.predicted[v.candidate]}", style="bold magenta", highlight=False)
        for n, c in enumerate(v.cells, 1):
            console.print(f"  ({n}) {_MARK[c.status]} {c.reason}")
        console.print(f"  cost: {_cost_text(report.costs.get(v.candidate))}")
        for w in v.warnings:
            console.print(f"  warning: {w}", style="yellow")
        for caveat in v.caveats:
            console.print(f"  caveat: {caveat}", style="yellow", highlight=False)
    rec = report.recommendation
    if rec.candidate is None:
        console.print(f"recommendation: none ({rec.reason})")
    else:
        margin = f", margin {rec.margin:.0%} under the line" if rec.margin is not None else ""
        console.print(f"recommendation: [bold]{rec.candidate}[/bold] ({rec.reason}{margin})")
    pick = report.predicted_pick
    if pick is not None:
        console.print(
            f"PREDICTED: {pick.candidate} would be picked on predicted numbers ({pick.reason})",
            style="bold magenta",
            highlight=False,
        )
    if predicted:
        console.print(f"PREDICTED candidates: {report.predicted_note}", style="magenta", highlight=False)
    _render_tier(report, console)


def _render_tier(report: SelectReport, console: Console) -> None:
    t = report.tier
    if t is None:
        return
    if isinstance(t, str):
        console.print(f"tiered routing: {t}")
        return
    lines = ", ".join(
        f"{x['line']}: {x['blended']:.4g} ms {'meets' if x['passes'] else 'misses'}"
        for x in t.lines
        if x["blended"] is not None
    )
    cost = f"; ${t.per_k_requests:.4g}/1k req" if t.per_k_requests is not None else ""
    console.print(
        f"tiered routing: {t.share:.0%} to {t.small}, the rest to {t.large}: {lines}{cost} (estimate)"
    )
