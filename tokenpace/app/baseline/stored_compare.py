"""Use case: compare two stored runs from the figures kept with them when they were saved (each
run's percentiles with their bootstrap SEs: ``comparison/stored_levels.py``), without reading a
record. The same sides, noise and verdict rule as ``compare.compare_runs``; where a run of either
side or of the library's reruns has no stored figures, there is no such comparison (None) and
``compare_runs`` is the way."""

from __future__ import annotations

from collections.abc import Sequence

from tokenpace.adapters.store import Store
from tokenpace.app.baseline.compare import RunComparison, finish, measured_together, resolve_sides
from tokenpace.app.baseline.library_noise import runs_host, stored_library_noise
from tokenpace.core.analysis.comparison.compare import DEFAULT_ALPHA, DEFAULT_PERCENTILES
from tokenpace.core.analysis.comparison.stored_levels import STORED_PERCENTILES, compare_levels
from tokenpace.core.analysis.evidence.verdict import DEFAULT_MIN_EFFECT


def compare_stored(
    store: Store,
    ref_a: str,
    ref_b: str,
    percentiles: Sequence[float] = DEFAULT_PERCENTILES,
    alpha: float = DEFAULT_ALPHA,
    min_effect: float = DEFAULT_MIN_EFFECT,
    allow_invalid: bool = False,
    single: bool = False,
    one_sided: bool = False,
) -> RunComparison | None:
    """B against A as ``compare_runs`` from stored figures; None where some run has none, or a
    percentile asked is not among those stored."""
    if not set(percentiles) <= set(STORED_PERCENTILES):
        return None
    sides = resolve_sides(store, ref_a, ref_b, allow_invalid, single)
    ids = [*sides.ids_a, *sides.ids_b]
    levels = store.run_levels(ids)
    if any(i not in levels for i in ids):
        return None
    library = stored_library_noise(store, sides.a, ids)
    if library is None:
        return None
    learned = [*store.learned_noise(sides.a.conditions, sides.a.model, sides.own_groups), *library]
    comparison = compare_levels(
        [levels[i] for i in sides.ids_a],
        [levels[i] for i in sides.ids_b],
        percentiles=percentiles,
        alpha=alpha,
        min_effect=min_effect,
        learned=learned,
        one_sided=one_sided,
        same_window=measured_together(sides.a, sides.b),
        host=runs_host(store, ids),
    )
    return finish(sides, comparison)
