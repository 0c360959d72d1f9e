"""Outcome events in the run store: appended by the gateway's writer, read by ``tokenpace arms``."""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa

from tokenpace.adapters.store import schema as s
from tokenpace.adapters.store.store import Store
from tokenpace.core.events import OutcomeEvent


def save_events(store: Store, events: Sequence[OutcomeEvent]) -> None:
    """One transaction; raises StoreError (the sink counts the batch as dropped)."""
    if not events:
        return
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
    with store._tx("store outcome events") as conn:
        conn.execute(sa.insert(s.outcome_events), rows)


def load_events(
    store: Store, since_unix: float, until_unix: float | None = None, sessions: Sequence[str] | None = None
) -> list[OutcomeEvent]:
    """Events received in [since, until), oldest first, optionally of some gateway sessions only."""
    t = s.outcome_events
    query = sa.select(t).where(t.c.unix_s >= since_unix).order_by(t.c.unix_s, t.c.id)
    if until_unix is not None:
        query = query.where(t.c.unix_s < until_unix)
    if sessions is not None:
        query = query.where(t.c.session.in_(list(sessions)))
    with store._tx("read outcome events") as conn:
        rows = conn.execute(query).mappings().all()
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


def event_names(store: Store) -> list[str]:
    """Every event name the store has ever received (a guard on any other name is a typo)."""
    t = s.outcome_events
    with store._tx("read event names") as conn:
        return sorted(r[0] for r in conn.execute(sa.select(t.c.event).distinct()))
