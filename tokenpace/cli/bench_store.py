"""Auto-save of `tokenpace bench` runs: open the store before any load, save every record after."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click
from rich.console import Console

if TYPE_CHECKING:  # imported when used: --no-store runs never load SQLAlchemy
    from tokenpace.adapters.store import Store
    from tokenpace.app.bench import BenchResult

STORE_HELP = (
    "Save the run in this store: a SQLite path or URL, or postgresql://... "
    "(default: $TOKENPACE_STORE, else ~/.local/share/tokenpace/runs.db)."
)


def open_for_run(url: str | None, no_store: bool, cmd: str = "bench") -> Store | None:
    """The store, proven writable, or None with --no-store. Exits 2 with one line when it fails."""
    if no_store:
        return None
    from tokenpace.adapters.store import StoreError
    from tokenpace.app.store_ops import open_store

    try:
        return open_store(url, writable=True)
    except StoreError as exc:
        click.echo(
            f"tokenpace {cmd}: error: {exc} (no load was sent; pass --no-store to run without saving)",
            err=True,
        )
        raise SystemExit(2) from None


def save_after_run(store: Store | None, result: BenchResult, out: object, console: Console) -> bool:
    """Save the run (records included); on failure say where the result file is. True when saved."""
    if store is None:
        return True
    from tokenpace.adapters.store import StoreError
    from tokenpace.app.store_ops import save_result

    try:
        n = save_result(store, result)
    except StoreError as exc:
        click.echo(
            f"tokenpace bench: error: could not store run {result.run_id}: {exc}. "
            f"The result is in {out}; store it later with: tokenpace runs import {out}",
            err=True,
        )
        return False
    console.print(f"stored as run {result.run_id} ({n} records) in {store.display_url}", highlight=False)
    return True
