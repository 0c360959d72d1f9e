"""A run's live figures wired to its job: the feed made for a run (bench, a sweep's step) when
anyone will read them (the store, or a display that shows them), and its end state."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from tokenpace.app.bench.bench import BenchRun
from tokenpace.app.watch.live import LiveFeed, LiveView
from tokenpace.app.workers.workers import AnyRun

if TYPE_CHECKING:
    from tokenpace.adapters.store import Store


def live_feed(
    run: AnyRun, kind: str, store: Store | None, labels: Mapping[str, str], progress: object
) -> LiveFeed | None:
    """None where nobody reads the figures (no store, no display that shows them)."""
    view = progress if isinstance(progress, LiveView) else None
    if store is None and view is None:
        return None
    sent = (lambda: len(run.context.records)) if isinstance(run, BenchRun) else None  # workers: unknown
    return LiveFeed(run.run_id, kind, store, labels, view.live if view is not None else None, sent)


def failed_state(exc: BaseException) -> str:
    """The live row's end state of a run that raised."""
    return f"failed: {type(exc).__name__}"
