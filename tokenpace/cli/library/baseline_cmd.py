"""`tokenpace baseline set|list|unset`: named runs to compare and gate against."""

from __future__ import annotations

import click
from rich.console import Console
from rich.table import Table

from tokenpace.app.baseline.store_ops import set_baseline
from tokenpace.cli.fit import show_table
from tokenpace.cli.library.store_opts import ago, fail, guarded, open_or_fail, store_option


@click.group()
def baseline() -> None:
    """Name runs as baselines (e.g. prod, v1.4-h100) for compare and check."""


@baseline.command("set")
@click.argument("name")
@click.argument("ref")
@click.option("--allow-invalid", is_flag=True, help="Accept a run that is NOT VALID or was interrupted.")
@store_option
@guarded("baseline set")
def set_(name: str, ref: str, allow_invalid: bool, store_url: str | None) -> None:
    """Make NAME point at a run (id, KEY=VALUE label, other baseline, or latest)."""
    if not name.strip() or "=" in name:
        fail("baseline set", f"{name!r} is not a usable baseline name (no '=' and not empty)")
    store = open_or_fail("baseline set", store_url)
    run = set_baseline(store, name.strip(), ref, allow_invalid)
    click.echo(f"baseline {name.strip()} = run {run.id}")


@baseline.command("list")
@store_option
@guarded("baseline list")
def list_(store_url: str | None) -> None:
    """Baselines and the runs they point at."""
    store = open_or_fail("baseline list", store_url)
    table = Table(header_style="bold")
    for col in ("baseline", "run", "model", "labels", "set (UTC)"):
        table.add_column(col)
    items = store.baselines()
    for b in items:
        run = store.get_run(b.run_id)
        labels = ",".join(f"{k}={v}" for k, v in sorted(run.labels.items())) if run else ""
        table.add_row(b.name, b.run_id, (run.model if run else None) or "-", labels, ago(b.set_unix))
    show_table(Console(), table)
    if not items:
        click.echo("no baselines yet: tokenpace baseline set NAME RUN")


@baseline.command("unset")
@click.argument("name")
@store_option
@guarded("baseline unset")
def unset(name: str, store_url: str | None) -> None:
    """Remove a baseline name (the run stays)."""
    store = open_or_fail("baseline unset", store_url)
    if not store.unset_baseline(name):
        fail("baseline unset", f"no baseline named {name!r}")
    click.echo(f"baseline {name} removed")
