"""Use case: a metric over comparable stored runs, with change-point detection."""

from __future__ import annotations

from collections.abc import Mapping

from tokenpace.adapters.store import Store
from tokenpace.core.analysis.conditions import differing_fields
from tokenpace.core.analysis.history import History, analyse_history


def history(
    store: Store,
    metric: str,
    where: Mapping[str, str],
    since: float | None = None,
    until: float | None = None,
    limit: int | None = None,
    alpha: float = 0.05,
    permutations: int = 199,
    min_size: int = 5,
    seed: int = 0,
) -> tuple[History, list[str]]:
    """The history (oldest first) and the condition fields that vary across its runs."""
    runs = store.list_runs(where=where, since=since, until=until, full=True)
    if limit is not None:
        runs = runs[:limit]
    runs.reverse()
    hist = analyse_history(
        [(r.id, r.started_at, r.summary) for r in runs], metric, alpha, permutations, min_size, seed
    )
    varying: set[str] = set()
    for r in runs[1:]:
        varying.update(f for f, _, _ in differing_fields(runs[0].conditions, r.conditions))
    return hist, sorted(varying)
