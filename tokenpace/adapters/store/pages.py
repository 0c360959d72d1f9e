"""Pages of runs for the web console, as methods of ``SqlStore``: labels, columns, validity, kinds,
repeat groups and time filtered in SQL; condition fields matched on the newest ``SCAN_MAX`` runs;
a page of at most ``PAGE_ROWS_MAX`` full rows; an even sample of a run's records."""

from __future__ import annotations

import math
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any

import sqlalchemy as sa

from tokenpace.adapters.store import schema as s
from tokenpace.adapters.store.protocol import PAGE_ROWS_MAX, SCAN_MAX, RunInfo, RunPage, RunQuery
from tokenpace.adapters.store.query import COLUMN_KEYS, text_of
from tokenpace.core.record import RequestRecord


def _spellings(want: str) -> list[str]:
    """How a stored JSON value that ``query.matches`` takes for ``want`` reads as SQL text."""
    low = want.lower()
    out = {low, {"true": "1", "false": "0"}.get(low, low)}
    try:
        number = float(low)
    except ValueError:
        return sorted(out)
    if number.is_integer():
        out |= {str(int(number)), f"{number:.1f}"}
    return sorted(out)


def _filtered(query: RunQuery, cols: Sequence[Any]) -> tuple[sa.Select[Any], dict[str, str]]:
    """The SQL part of the query, and the condition filters left for Python to match exactly (SQL
    keeps every run they may match: a JSON path's text in its possible spellings)."""
    q = sa.select(*cols)
    rest = dict(query.conditions)
    for key in COLUMN_KEYS:
        if key in rest:
            q = q.where(getattr(s.runs.c, key) == rest.pop(key))
    for key, want in rest.items():
        path = tuple(key.split("."))
        q = q.where(sa.func.lower(s.runs.c.conditions[path].as_string()).in_(_spellings(want)))
    for key, value in query.labels.items():
        lab = s.run_labels.c
        q = q.where(sa.exists().where(lab.run_id == s.runs.c.id, lab.key == key, lab.value == value))
    if query.since is not None:
        q = q.where(s.runs.c.started_unix >= query.since)
    if query.until is not None:
        q = q.where(s.runs.c.started_unix <= query.until)
    if query.valid is not None:
        q = q.where(s.runs.c.valid == query.valid)
    kinds = [k for k in query.kinds if k != "repeat"]
    in_group = sa.exists().where(s.repeat_runs.c.run_id == s.runs.c.id)
    if kinds and len(kinds) < len(query.kinds):
        q = q.where(sa.or_(s.runs.c.kind.in_(kinds), in_group))
    elif kinds:
        q = q.where(s.runs.c.kind.in_(kinds))
    elif query.kinds:
        q = q.where(in_group)
    return q, rest


def _same(value: Any, want: str) -> bool:
    """A condition's stored value equals a filter's text (SQLite reads a JSON boolean as 0 or 1)."""
    if want in ("true", "false") and type(value) is int and value in (0, 1):
        return value == (want == "true")
    return text_of(value) == want


def _groups(ids: Sequence[str]) -> sa.Select[Any]:
    c = s.repeat_runs.c
    return sa.select(c.run_id, c.group_id).where(c.run_id.in_(ids))


_NEWEST = (s.runs.c.started_unix.desc(), s.runs.c.stored_unix.desc(), s.runs.c.id)


class RunPages:
    """Mixed into ``SqlStore``, which provides the transaction, its rows and their labels."""

    def _tx(self, what: str) -> AbstractContextManager[sa.Connection]:
        raise NotImplementedError

    def _info(self, row: Any, labels: dict[str, str]) -> RunInfo:
        raise NotImplementedError

    def _labels(self, conn: sa.Connection, ids: Sequence[str]) -> dict[str, dict[str, str]]:
        raise NotImplementedError

    def page_runs(self, query: RunQuery) -> RunPage:
        """One page of runs, newest first, with summaries; the count of all that matched."""
        limit = max(0, min(query.limit, PAGE_ROWS_MAX))
        offset = max(0, query.offset)
        keys = [k for k in query.conditions if k not in COLUMN_KEYS]
        fields = [s.runs.c.conditions[tuple(k.split("."))].label(f"f{i}") for i, k in enumerate(keys)]
        with self._tx("read the store") as conn:
            q, rest = _filtered(query, [s.runs.c.id, *fields])
            scanned_all = True
            if rest:  # condition fields: each candidate's values (not its conditions) matched exactly
                rows = list(conn.execute(q.order_by(*_NEWEST).limit(SCAN_MAX + 1)))
                scanned_all = len(rows) <= SCAN_MAX
                wants = [rest[k].lower() for k in keys]
                hits = [r.id for r in rows[:SCAN_MAX] if all(map(_same, r[1:], wants))]
                total, ids = len(hits), hits[offset : offset + limit]
            else:
                total = int(conn.execute(sa.select(sa.func.count()).select_from(q.subquery())).scalar_one())
                ids = [r.id for r in conn.execute(q.order_by(*_NEWEST).offset(offset).limit(limit))]
            full = {r.id: r for r in conn.execute(sa.select(s.runs).where(s.runs.c.id.in_(ids)))}
            labels = self._labels(conn, ids)
            groups = {r.run_id: r.group_id for r in conn.execute(_groups(ids))}
        runs = [self._info(full[i], labels[i]) for i in ids if i in full]
        return RunPage(runs, total, scanned_all, groups)

    def sample_records(self, run_id: str, limit: int) -> list[RequestRecord]:
        """At most ``limit`` records, every k-th in finishing order (all of them when they fit)."""
        with self._tx("read the store") as conn:
            count = conn.execute(sa.select(s.runs.c.record_count).where(s.runs.c.id == run_id)).scalar()
            if not count or limit <= 0:
                return []
            stride = max(1, math.ceil(int(count) / limit))
            q = sa.select(s.records.c.data).where(s.records.c.run_id == run_id)
            if stride > 1:
                q = q.where(s.records.c.seq % stride == 0)
            rows = conn.execute(q.order_by(s.records.c.seq).limit(limit))
            return [RequestRecord.from_dict(r.data) for r in rows]
