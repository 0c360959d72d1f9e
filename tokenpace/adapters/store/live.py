"""Runs in progress in the run store (table ``live_runs``): the SQL, and the methods ``SqlStore``
takes from ``LiveRuns``. One row per run, its figures rewritten in place; the row stays, marked
ended, when the run stops. Rows not written for ``KEEP_ENDED_S`` (ended, or left by a run that was
killed: a live run writes every second) go when the next run starts."""

from __future__ import annotations

import time
from collections.abc import Mapping
from contextlib import AbstractContextManager
from typing import Any

import sqlalchemy as sa

from tokenpace.adapters.store import schema as s
from tokenpace.adapters.store.protocol import LiveRun

KEEP_ENDED_S = 24 * 3600.0  # a row's last figures, kept this long after its last write
MAX_LISTED = 200  # live_runs() answers at most this many rows, the newest first


def _live(row: Any) -> LiveRun:
    return LiveRun(
        row.run_id, row.kind, float(row.started_unix), float(row.updated_unix), row.state,
        bool(row.ended), dict(row.labels), dict(row.figures),
    )  # fmt: skip


class LiveRuns:
    """Mixed into ``SqlStore``, which provides the transaction."""

    def _tx(self, what: str) -> AbstractContextManager[sa.Connection]:
        raise NotImplementedError

    def start_live(self, run_id: str, kind: str, labels: Mapping[str, str]) -> None:
        """A run starts: its row (figures empty), and rows not written for ``KEEP_ENDED_S`` removed."""
        t, now = s.live_runs, time.time()
        with self._tx(f"start live figures of run {run_id}") as conn:
            conn.execute(sa.delete(t).where(t.c.updated_unix < now - KEEP_ENDED_S))
            conn.execute(sa.delete(t).where(t.c.run_id == run_id))
            conn.execute(
                sa.insert(t).values(
                    run_id=run_id, kind=kind, started_unix=now, updated_unix=now, state="running",
                    ended=False, labels=dict(labels), figures={},
                )
            )  # fmt: skip

    def publish_live(
        self, run_id: str, figures: Mapping[str, Any], state: str = "running", ended: bool = False
    ) -> None:
        """The run's figures so far, in place of the last ones; ``ended`` with its final state."""
        t = s.live_runs
        values = {"updated_unix": time.time(), "figures": dict(figures), "state": state, "ended": ended}
        with self._tx(f"publish live figures of run {run_id}") as conn:
            conn.execute(sa.update(t).where(t.c.run_id == run_id).values(**values))

    def live_runs(self, ended: bool | None = None) -> list[LiveRun]:
        """Runs in progress (``ended=False``), ended ones (True) or both, the newest first."""
        t = s.live_runs
        q = sa.select(t).order_by(t.c.started_unix.desc()).limit(MAX_LISTED)
        if ended is not None:
            q = q.where(t.c.ended.is_(ended))
        with self._tx("read live runs") as conn:
            return [_live(r) for r in conn.execute(q)]

    def get_live(self, run_id: str) -> LiveRun | None:
        t = s.live_runs
        with self._tx("read live runs") as conn:
            row = conn.execute(sa.select(t).where(t.c.run_id == run_id)).first()
            return None if row is None else _live(row)
