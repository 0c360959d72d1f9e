"""Use case: a metric over comparable stored runs, with change-point detection."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tokenpace.adapters.store import Store
from tokenpace.app.baseline.library_noise import learned_noise
from tokenpace.core.analysis.comparison.conditions import differing_fields, gate_mismatches
from tokenpace.core.analysis.comparison.history import DEFAULT_MIN_SHIFT, History, analyse_history
from tokenpace.core.analysis.evidence.runnoise import RunNoise, pool
from tokenpace.core.running_summary import sketch_error


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
    refuse_finer_than_sketch(metric, min_shift, [r.summary for r in runs])
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


def refuse_finer_than_sketch(metric: str, min_shift: float, summaries: list[dict[str, Any]]) -> None:
    """A long gateway run's stored percentiles come from a sketch (within 1 %): two of them may
    differ by twice that with nothing changed, so a shift smaller than that cannot be judged."""
    if "." not in metric:
        return  # whole-run numbers (throughput, goodput, error rate) are exact in every summary
    err = max((sketch_error(s) for s in summaries), default=0.0)
    if err and min_shift < 2 * err:
        raise ValueError(
            f"--min-shift {min_shift:.1%} is finer than these runs' percentiles can tell: some are "
            f"from a sketch within {err:.0%} of the exact value (a long gateway run), so use "
            f"--min-shift {2 * err:.0%} or more"
        )


def history_noise(store: Store, hist: History) -> RunNoise | None:
    """What the library's reruns of these runs' test (and repeat groups) taught about this metric's
    noise between runs; None when the runs are not all one test, or the metric is not a stored percentile."""
    if "." not in hist.metric or not hist.metric.split(".", 1)[1].startswith("p") or not hist.points:
        return None
    runs = [r for r in (store.get_run(p.run_id) for p in (hist.points[0], hist.points[-1])) if r]
    if len(runs) < 2 or gate_mismatches(runs[0].conditions, runs[1].conditions):
        return None
    noise = pool(hist.metric, learned_noise(store, runs[-1]))
    return None if noise.assumed else noise
