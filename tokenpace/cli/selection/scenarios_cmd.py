"""`tokenpace scenarios`: the scenarios `select` judges against (the defaults, plus a user file)."""

from __future__ import annotations

from pathlib import Path

import click
import orjson
from rich.console import Console
from rich.table import Table

from tokenpace.app.selection.select import load_scenarios
from tokenpace.cli.fit import show_table
from tokenpace.cli.library.store_opts import guarded


@click.command()
@click.option(
    "--scenarios",
    "scenarios_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="A TOML file of your own scenarios and prices, added to the defaults (your names win).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the scenarios as JSON.")
@guarded("scenarios")
def scenarios(scenarios_file: Path | None, as_json: bool) -> None:
    """List the scenarios: workload, load and tolerance lines (SLOs) of each use case."""
    book = load_scenarios(scenarios_file)
    if as_json:
        doc = {
            "scenarios": [s.to_dict() | {"source": book.sources.get(n)} for n, s in book.scenarios.items()],
            "prices": {n: p.to_dict() for n, p in book.prices.items()},
        }
        click.echo(orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode())
        return
    table = Table(title="Scenarios", show_lines=True)
    table.add_column("name", no_wrap=True)
    for col in ("workload", "load", "lines", "from"):
        table.add_column(col)
    for name, s in book.scenarios.items():
        lines = [line.label() for line in s.slos]
        if s.attainment is not None:
            lines.append(f">= {s.attainment:.0%} of requests meet every line")
        table.add_row(
            name,
            f"{s.input_len} in / {s.output_len} out tokens",
            s.load_label(),
            "\n".join(lines),
            book.sources.get(name, ""),
        )
    console = Console()
    show_table(console, table)
    if book.prices:
        console.print("prices: " + ", ".join(sorted(book.prices)))
