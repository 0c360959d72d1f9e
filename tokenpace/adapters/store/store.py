"""The run store's operations, one SQLAlchemy Core layer for SQLite and PostgreSQL."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any

import orjson
import sqlalchemy as sa
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.pool import NullPool

from tokenpace.adapters.store import events as ev
from tokenpace.adapters.store import schema as s
from tokenpace.adapters.store.fleet import FleetConfigs
from tokenpace.adapters.store.groups import RepeatGroups
from tokenpace.adapters.store.levels import RunLevels, delete_levels
from tokenpace.adapters.store.live import LiveRuns
from tokenpace.adapters.store.migrations import migrate
from tokenpace.adapters.store.pages import RunPages
from tokenpace.adapters.store.protocol import BaselineInfo, RunInfo
from tokenpace.adapters.store.query import COLUMN_KEYS, matches, parse_where
from tokenpace.adapters.store.record_rows import insert_records
from tokenpace.adapters.store.url import (
    StoreError,
    describe_error,
    missing_driver,
    normalize_url,
    redact,
    sqlite_path,
)
from tokenpace.core.events import ConfigChange, OutcomeEvent
from tokenpace.core.record import RequestRecord

_JSON_OPTS = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS


def _dumps(obj: Any) -> str:
    return orjson.dumps(obj, option=_JSON_OPTS).decode()


class SqlStore(RepeatGroups, FleetConfigs, RunPages, LiveRuns, RunLevels):
    """The ``Store`` on SQLAlchemy Core (SQLite, PostgreSQL).

    ``SqlStore.open(url)`` connects and brings the schema up to date; every error is a StoreError."""

    def __init__(self, engine: sa.Engine, url: str, migrated_from: int) -> None:
        self.engine = engine
        self.url = url
        self.migrated_from = migrated_from

    @property
    def display_url(self) -> str:
        return redact(self.url)

    @classmethod
    def open(cls, url: str) -> SqlStore:
        url = normalize_url(url)
        path = sqlite_path(url)
        if path is not None:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(f"cannot create the store's folder {path.parent}: {exc.strerror}") from None
            connect_args: dict[str, Any] = {"timeout": 30}
        else:
            connect_args = {"connect_timeout": 10}
        try:
            engine = sa.create_engine(
                url,
                poolclass=NullPool,
                connect_args=connect_args,
                json_serializer=_dumps,
                json_deserializer=orjson.loads,
            )
            with engine.begin() as conn:
                found = migrate(conn)
        except StoreError:
            raise
        except ImportError as exc:
            raise StoreError(missing_driver(url, exc)) from None
        except (SQLAlchemyError, OSError) as exc:
            raise StoreError(f"cannot open the store {redact(url)}: {describe_error(exc)}") from None
        return cls(engine, url, found)

    def close(self) -> None:
        self.engine.dispose()

    @contextmanager
    def _tx(self, what: str) -> Iterator[sa.Connection]:
        try:
            with self.engine.begin() as conn:
                yield conn
        except StoreError:
            raise
        except SQLAlchemyError as exc:
            raise StoreError(f"cannot {what} ({self.display_url}): {describe_error(exc)}") from None

    def check_writable(self) -> None:
        """Fails with StoreError when the store cannot be written (read-only file, no rights)."""
        with self._tx("write to the store") as conn:
            conn.execute(sa.update(s.schema_version).values(version=s.schema_version.c.version))

    def schema_version(self) -> int:
        with self._tx("read the store") as conn:
            return int(conn.execute(sa.select(sa.func.max(s.schema_version.c.version))).scalar() or 0)

    # --- runs ---
    def save_run(
        self,
        run_id: str,
        conditions: Mapping[str, Any],
        summary: Mapping[str, Any],
        records: Sequence[RequestRecord],
        *,
        kind: str = "bench",
        labels: Mapping[str, str] | None = None,
        interrupted: bool = False,
        valid: bool = True,
        stop_reason: str | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        """Store a run and all its records in one transaction: all of it is stored, or nothing."""
        tool = conditions.get("tool") or {}
        started_at = str(conditions.get("started_at") or "")
        started_unix = _unix(started_at)
        labels = dict(labels if labels is not None else conditions.get("labels") or {})
        row = {
            "id": run_id,
            "kind": kind,
            "started_at": started_at,
            "started_unix": started_unix,
            "stored_unix": time.time(),
            "model": conditions.get("model"),
            "endpoint": conditions.get("endpoint"),
            "tool_version": tool.get("version") if isinstance(tool, Mapping) else None,
            "interrupted": interrupted,
            "valid": valid,
            "stop_reason": stop_reason,
            "record_count": len(records),
            "conditions": dict(conditions),
            "summary": dict(summary),
            "extra": dict(extra or {}),
        }
        try:
            with self._tx(f"store run {run_id}") as conn:
                conn.execute(sa.insert(s.runs).values(**row))
                if labels:
                    conn.execute(
                        sa.insert(s.run_labels),
                        [{"run_id": run_id, "key": k, "value": str(v)} for k, v in labels.items()],
                    )
                insert_records(conn, run_id, records, first_seq=0)
        except StoreError as exc:
            if "UNIQUE" in str(exc) or "duplicate key" in str(exc):
                raise StoreError(f"the store already has a run {run_id}") from None
            raise

    def append_records(self, run_id: str, records: Sequence[RequestRecord], first_seq: int) -> None:
        """Add records to a stored run, numbered from ``first_seq``, and its count, in one transaction."""
        runs = s.runs
        with self._tx(f"append records to run {run_id}") as conn:
            insert_records(conn, run_id, records, first_seq)
            conn.execute(
                sa.update(runs)
                .where(runs.c.id == run_id)
                .values(record_count=runs.c.record_count + len(records), stored_unix=time.time())
            )

    def set_summary(self, run_id: str, summary: Mapping[str, Any]) -> None:
        runs = s.runs
        with self._tx(f"update the summary of run {run_id}") as conn:
            conn.execute(sa.update(runs).where(runs.c.id == run_id).values(summary=dict(summary)))

    def save_events(self, events: Sequence[OutcomeEvent]) -> None:
        """One transaction; raises StoreError (the gateway's sink counts the batch as dropped)."""
        if events:
            with self._tx("store outcome events") as conn:
                ev.insert_events(conn, events)

    def load_events(
        self, since_unix: float, until_unix: float | None = None, sessions: Sequence[str] | None = None
    ) -> list[OutcomeEvent]:
        """Events received in [since, until), oldest first, optionally of some gateway sessions only."""
        with self._tx("read outcome events") as conn:
            return ev.select_events(conn, since_unix, until_unix, sessions)

    def save_config_change(self, change: ConfigChange) -> None:
        with self._tx("store a configuration change") as conn:
            ev.insert_config_change(conn, change)

    def load_config_changes(
        self, since_unix: float, until_unix: float | None = None, sessions: Sequence[str] | None = None
    ) -> list[ConfigChange]:
        with self._tx("read configuration changes") as conn:
            return ev.select_config_changes(conn, since_unix, until_unix, sessions)

    def event_names(self) -> list[str]:
        """Every event name the store has ever received (a guard on any other name is a typo)."""
        with self._tx("read event names") as conn:
            return ev.select_event_names(conn)

    def _info(self, row: Any, labels: dict[str, str]) -> RunInfo:
        return RunInfo(
            row.id,
            row.kind,
            row.started_at,
            row.started_unix,
            row.stored_unix,
            row.model,
            row.endpoint,
            row.tool_version,
            bool(row.interrupted),
            bool(row.valid),
            row.stop_reason,
            row.record_count,
            labels,
            getattr(row, "conditions", None) or {},
            getattr(row, "summary", None) or {},
            getattr(row, "extra", None) or {},
        )

    def _labels(self, conn: sa.Connection, ids: Sequence[str]) -> dict[str, dict[str, str]]:
        out: dict[str, dict[str, str]] = {i: {} for i in ids}
        for start in range(0, len(ids), 500):
            chunk = list(ids[start : start + 500])
            q = sa.select(s.run_labels).where(s.run_labels.c.run_id.in_(chunk))
            for r in conn.execute(q):
                out[r.run_id][r.key] = r.value
        return out

    def list_runs(
        self,
        where: Mapping[str, str] | None = None,
        since: float | None = None,
        until: float | None = None,
        limit: int | None = None,
        newest_first: bool = True,
        full: bool = False,
    ) -> list[RunInfo]:
        """Runs matching every ``where`` item (labels, columns, dotted conditions) within the times."""
        where = dict(where or {})
        cols = [c for c in s.runs.c if full or c.name not in ("summary", "extra")]
        q = sa.select(*cols)
        for key in COLUMN_KEYS:
            if key in where:
                q = q.where(getattr(s.runs.c, key) == where.pop(key))
        if since is not None:
            q = q.where(s.runs.c.started_unix >= since)
        if until is not None:
            q = q.where(s.runs.c.started_unix <= until)
        order = s.runs.c.started_unix.desc() if newest_first else s.runs.c.started_unix.asc()
        q = q.order_by(order, s.runs.c.stored_unix.desc() if newest_first else s.runs.c.stored_unix)
        if limit is not None and not where:
            q = q.limit(limit)
        with self._tx("read the store") as conn:
            rows = list(conn.execute(q))
            labels = self._labels(conn, [r.id for r in rows])
        out = []
        for r in rows:
            info = self._info(r, labels[r.id])
            if matches(info, where):
                out.append(info)
                if limit is not None and len(out) >= limit:
                    break
        return out

    def get_run(self, run_id: str) -> RunInfo | None:
        with self._tx("read the store") as conn:
            row = conn.execute(sa.select(s.runs).where(s.runs.c.id == run_id)).first()
            if row is None:
                return None
            return self._info(row, self._labels(conn, [run_id])[run_id])

    def resolve(self, ref: str) -> RunInfo:
        """A run by id, baseline name, ``key=value[,...]`` (newest match), unique id prefix or ``latest``."""
        ref = ref.strip()
        if not ref:
            raise StoreError("empty run reference")
        run = self.get_run(ref)
        if run is not None:
            return run
        base = self.get_baseline(ref)
        if base is not None:
            found = self.get_run(base.run_id)
            if found is not None:
                return found
        if ref == "latest":
            latest = self.list_runs(limit=1)
            if not latest:
                raise StoreError("the store has no runs yet")
            return self.get_run(latest[0].id)  # type: ignore[return-value]
        if "=" in ref:
            where = parse_where([p for p in ref.split(",") if p.strip()])
            hits = self.list_runs(where=where, limit=1)
            if not hits:
                raise StoreError(f"no stored run matches {ref!r}")
            return self.get_run(hits[0].id)  # type: ignore[return-value]
        if len(ref) >= 4:
            with self._tx("read the store") as conn:
                ids = list(conn.execute(sa.select(s.runs.c.id).where(s.runs.c.id.startswith(ref)).limit(6)))
            if len(ids) == 1:
                return self.get_run(ids[0].id)  # type: ignore[return-value]
            if len(ids) > 1:
                raise StoreError(f"{ref!r} is the start of several run ids: give more of it")
        raise StoreError(
            f"no run, baseline or label matches {ref!r} (give a run id, a baseline name or key=value)"
        )

    def load_records(self, run_id: str) -> list[RequestRecord]:
        q = sa.select(s.records.c.data).where(s.records.c.run_id == run_id).order_by(s.records.c.seq)
        with self._tx("read the store") as conn:
            return [RequestRecord.from_dict(r.data) for r in conn.execute(q)]

    def record_counts(self, run_id: str) -> dict[str, int]:
        """Records by status, warm-up included under ``warmup``; ``total`` is every record."""
        c = s.records.c
        q = (
            sa.select(c.status, c.warmup, sa.func.count())
            .where(c.run_id == run_id)
            .group_by(c.status, c.warmup)
        )
        out: dict[str, int] = {"total": 0, "warmup": 0}
        with self._tx("read the store") as conn:
            for status, warmup, n in conn.execute(q):
                out["total"] += n
                if warmup:
                    out["warmup"] += n
                else:
                    out[status] = out.get(status, 0) + n
        return out

    def set_labels(self, run_id: str, labels: Mapping[str, str]) -> None:
        with self._tx(f"label run {run_id}") as conn:
            for key, value in labels.items():
                t = s.run_labels
                conn.execute(sa.delete(t).where(t.c.run_id == run_id, t.c.key == key))
                conn.execute(sa.insert(t).values(run_id=run_id, key=key, value=value))

    def remove_labels(self, run_id: str, keys: Sequence[str]) -> None:
        t = s.run_labels
        with self._tx(f"label run {run_id}") as conn:
            conn.execute(sa.delete(t).where(t.c.run_id == run_id, t.c.key.in_(list(keys))))

    def delete_run(self, run_id: str) -> None:
        with self._tx(f"delete run {run_id}") as conn:
            q = sa.select(s.baselines.c.name).where(s.baselines.c.run_id == run_id)
            names = [b.name for b in conn.execute(q)]
            if names:
                raise StoreError(f"run {run_id} is the baseline {', '.join(names)}: unset or move it first")
            conn.execute(sa.delete(s.records).where(s.records.c.run_id == run_id))
            conn.execute(sa.delete(s.run_labels).where(s.run_labels.c.run_id == run_id))
            delete_levels(conn, run_id)
            conn.execute(sa.delete(s.runs).where(s.runs.c.id == run_id))

    # --- baselines ---
    def set_baseline(self, name: str, run_id: str) -> None:
        with self._tx(f"set baseline {name}") as conn:
            conn.execute(sa.delete(s.baselines).where(s.baselines.c.name == name))
            conn.execute(sa.insert(s.baselines).values(name=name, run_id=run_id, set_unix=time.time()))

    def unset_baseline(self, name: str) -> bool:
        with self._tx(f"unset baseline {name}") as conn:
            return conn.execute(sa.delete(s.baselines).where(s.baselines.c.name == name)).rowcount > 0

    def get_baseline(self, name: str) -> BaselineInfo | None:
        with self._tx("read the store") as conn:
            row = conn.execute(sa.select(s.baselines).where(s.baselines.c.name == name)).first()
        return None if row is None else BaselineInfo(row.name, row.run_id, row.set_unix)

    def baselines(self) -> list[BaselineInfo]:
        with self._tx("read the store") as conn:
            rows = conn.execute(sa.select(s.baselines).order_by(s.baselines.c.name))
            return [BaselineInfo(r.name, r.run_id, r.set_unix) for r in rows]


def _unix(iso: str) -> float:
    try:
        return datetime.fromisoformat(iso).timestamp()
    except (TypeError, ValueError):
        return time.time()
