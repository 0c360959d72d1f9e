"""Outcome events and configuration changes in the run store: appended by the gateway's writer,
read by ``tokenpace arms``.

The SQL only; ``SqlStore.save_events`` / ``load_events`` own the transaction and its errors.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from tokenpace.adapters.store import schema as s
from tokenpace.core.events import ConfigChange, OutcomeEvent


def insert_events(conn: sa.Connection, events: Sequence[OutcomeEvent]) -> None:
    rows = [
        {
            "session": e.session,
            "unix_s": e.unix_s,
            "event": e.event,
            "arm": e.arm,
            "upstream": e.upstream,
            "request_id": e.request_id,
            "user_hash": e.user,
            "value": e.value,
        }
        for e in events
    ]
    conn.execute(sa.insert(s.outcome_events), rows)


def _in_window(
    t: sa.Table, since_unix: float, until_unix: float | None, sessions: Sequence[str] | None
) -> sa.Select[Any]:
    """The rows of ``t`` from ``since_unix`` until ``until_unix`` (of these sessions), in order."""
    query = sa.select(t).where(t.c.unix_s >= since_unix).order_by(t.c.unix_s, t.c.id)
    if until_unix is not None:
        query = query.where(t.c.unix_s < until_unix)
    if sessions is not None:
        query = query.where(t.c.session.in_(list(sessions)))
    return query


def select_events(
    conn: sa.Connection, since_unix: float, until_unix: float | None, sessions: Sequence[str] | None
) -> list[OutcomeEvent]:
    rows = conn.execute(_in_window(s.outcome_events, since_unix, until_unix, sessions)).mappings().all()
    return [
        OutcomeEvent(
            event=r["event"],
            arm=r["arm"],
            unix_s=r["unix_s"],
            request_id=r["request_id"],
            user=r["user_hash"],
            upstream=r["upstream"],
            value=r["value"],
            session=r["session"],
        )
        for r in rows
    ]


def select_event_names(conn: sa.Connection) -> list[str]:
    t = s.outcome_events
    return sorted(r[0] for r in conn.execute(sa.select(t.c.event).distinct()))


def insert_config_change(conn: sa.Connection, change: ConfigChange) -> None:
    row = change.to_dict()
    conn.execute(sa.insert(s.config_changes), {**row, "who": row["who"][:300]})


def select_config_changes(
    conn: sa.Connection, since_unix: float, until_unix: float | None, sessions: Sequence[str] | None
) -> list[ConfigChange]:
    query = _in_window(s.config_changes, since_unix, until_unix, sessions)
    return [
        ConfigChange(
            r["session"], r["epoch"], r["unix_s"], r["who"], tuple(r["changed"]), r["before"], r["after"]
        )
        for r in conn.execute(query).mappings().all()
    ]
