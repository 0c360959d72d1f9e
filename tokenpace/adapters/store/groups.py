"""The run store's repeat groups (which runs repeated one test, and the noise between runs each
measured), as methods of ``SqlStore``; the SQL is in noise.py."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any

import sqlalchemy as sa

from tokenpace.adapters.store import noise
from tokenpace.core.analysis.evidence.runnoise import GroupNoise


class RepeatGroups:
    """Mixed into ``SqlStore``, which provides the transaction."""

    def _tx(self, what: str) -> AbstractContextManager[sa.Connection]:
        raise NotImplementedError

    def save_repeat_group(
        self,
        group_id: str,
        run_ids: Sequence[str],
        conditions: Mapping[str, Any],
        model: str | None,
        estimates: Sequence[GroupNoise],
    ) -> None:
        """A group of runs that repeated one test, and its noise estimates, in one transaction."""
        with self._tx(f"store repeat group {group_id}") as conn:
            noise.save_repeat_group(conn, group_id, run_ids, conditions, model, estimates)

    def repeat_group_of(self, run_id: str) -> tuple[str, list[str]] | None:
        """The repeat group a run belongs to and its runs still stored; None for a lone run."""
        with self._tx("read the store") as conn:
            return noise.group_of(conn, run_id)

    def learned_noise(
        self, conditions: Mapping[str, Any], model: str | None, exclude: Sequence[str] = ()
    ) -> list[GroupNoise]:
        """Every stored estimate of a group measured like ``conditions``."""
        with self._tx("read the store") as conn:
            return noise.learned_noise(conn, conditions, model, exclude)
