"""The run store's stored figures of each run (``comparison/stored_levels.py``: its percentiles with
their SEs, effective sizes and counts), and the batch reads that learning the library's noise needs
(summaries, repeat-group membership of many runs in one query each), as methods of ``SqlStore``."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any

import sqlalchemy as sa

from tokenpace.adapters.store import schema as s
from tokenpace.core.analysis.comparison.stored_levels import RunLevel

READ_BATCH = 500  # run ids per SELECT (a bound on the statement's parameters)


class RunLevels:
    """Mixed into ``SqlStore``, which provides the transaction."""

    def _tx(self, what: str) -> AbstractContextManager[sa.Connection]:
        raise NotImplementedError

    def save_levels(self, run_id: str, levels: Sequence[RunLevel]) -> None:
        """A stored run's figures, in place of any it had, in one transaction."""
        t = s.run_levels
        with self._tx(f"store the figures of run {run_id}") as conn:
            conn.execute(sa.delete(t).where(t.c.run_id == run_id))
            if levels:
                conn.execute(
                    sa.insert(t),
                    [
                        {
                            "run_id": run_id,
                            "key": v.key,
                            "n": v.n,
                            "value": v.value,
                            "se": v.se,
                            "n_eff": v.n_eff,
                        }
                        for v in levels
                    ],
                )

    def run_levels(self, run_ids: Sequence[str]) -> dict[str, dict[str, RunLevel]]:
        """The stored figures of each run that has them, by run id and key."""
        t = s.run_levels
        out: dict[str, dict[str, RunLevel]] = {}
        with self._tx("read the store") as conn:
            for chunk in _chunks(run_ids):
                q = sa.select(t).where(t.c.run_id.in_(chunk))
                for r in conn.execute(q):
                    out.setdefault(r.run_id, {})[r.key] = RunLevel(r.key, r.n, r.value, r.se, r.n_eff)
        return out

    def run_summaries(self, run_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """The stored summaries of the runs still stored, by run id."""
        out: dict[str, dict[str, Any]] = {}
        with self._tx("read the store") as conn:
            for chunk in _chunks(run_ids):
                q = sa.select(s.runs.c.id, s.runs.c.summary).where(s.runs.c.id.in_(chunk))
                out.update({r.id: dict(r.summary or {}) for r in conn.execute(q)})
        return out

    def grouped_runs(self, run_ids: Sequence[str]) -> set[str]:
        """Those of ``run_ids`` that belong to a repeat group."""
        rr = s.repeat_runs
        with self._tx("read the store") as conn:
            return {
                r.run_id
                for chunk in _chunks(run_ids)
                for r in conn.execute(sa.select(rr.c.run_id).where(rr.c.run_id.in_(chunk)))
            }


def _chunks(ids: Sequence[str]) -> list[list[str]]:
    return [list(ids[i : i + READ_BATCH]) for i in range(0, len(ids), READ_BATCH)]


def delete_levels(conn: sa.Connection, run_id: str) -> None:
    conn.execute(sa.delete(s.run_levels).where(s.run_levels.c.run_id == run_id))
