"""Use case: a metric over comparable stored runs, with change-point detection."""

from __future__ import annotations

from collections.abc import Mapping

from tokenpace.adapters.store import Store
from tokenpace.core.analysis.conditions import differing_fields, gate_mismatches
from tokenpace.core.analysis.history import DEFAULT_MIN_SHIFT, History, analyse_history
from tokenpace.core.analysis.runnoise import RunNoise, pool


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
    min_shift: float = DEFAULT_MIN_SHIFT,
) -> tuple[History, list[str]]:
    """The history (oldest first) and the condition fields that vary across its runs."""
    runs = store.list_runs(where=where, since=since, until=until, full=True)
    if limit is not None:
        runs = runs[:limit]
    runs.reverse()
    hist = analyse_history(
        [(r.id, r.started_at, r.summary) for r in runs],
        metric,
        alpha,
        permutations,
        min_size,
        seed,
        min_shift,
    )
    varying: set[str] = set()
    for r in runs[1:]:
        varying.update(f for f, _, _ in differing_fields(runs[0].conditions, r.conditions))
    return hist, sorted(varying)


def history_noise(store: Store, hist: History) -> RunNoise | None:
    """What repeat groups measured like these runs taught about this metric's noise between runs;
    None when the runs are not all one test, or the metric is not a stored percentile."""
    if "." not in hist.metric or not hist.metric.split(".", 1)[1].startswith("p") or not hist.points:
        return None
    runs = [r for r in (store.get_run(p.run_id) for p in (hist.points[0], hist.points[-1])) if r]
    if len(runs) < 2 or gate_mismatches(runs[0].conditions, runs[1].conditions):
        return None
    noise = pool(hist.metric, store.learned_noise(runs[-1].conditions, runs[-1].model))
    return None if noise.assumed else noise
