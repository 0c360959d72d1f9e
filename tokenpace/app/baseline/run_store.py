"""Store policy of the commands that make runs (bench, sweep, ab, gateway): open the store and prove
it writable before any load is sent; after the run, save it with every record, and say what
happened instead of losing the run when saving fails (its result file stays)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported when used: --no-store runs never load SQLAlchemy
    from tokenpace.adapters.store import Store
    from tokenpace.app.run.bench_config import BenchResult


class RunStoreError(Exception):
    """The store cannot take the run: refused before any load was sent."""


@dataclass
class SaveReport:
    run_id: str
    records: int
    where: str  # the store's URL, credentials hidden
    error: str | None = None  # why it could not be saved

    @property
    def ok(self) -> bool:
        return self.error is None


def open_for_run(url: str | None, save: bool = True) -> Store | None:
    """The store, proven writable, or None when the run is not to be saved."""
    if not save:
        return None
    from tokenpace.adapters.store import StoreError
    from tokenpace.app.baseline.store_ops import open_store

    try:
        return open_store(url, writable=True)
    except StoreError as exc:
        raise RunStoreError(f"{exc} (no load was sent; pass --no-store to run without saving)") from None


def save_run(store: Store, result: BenchResult, kind: str = "bench") -> SaveReport:
    """Save a finished (or interrupted) run with every record."""
    from tokenpace.adapters.store import StoreError
    from tokenpace.app.baseline.store_ops import save_result

    try:
        n = save_result(store, result, kind=kind)
    except StoreError as exc:
        return SaveReport(result.run_id, len(result.records), store.display_url, str(exc))
    return SaveReport(result.run_id, n, store.display_url)
