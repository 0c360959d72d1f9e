"""Runs in progress in the store (adapters/store/live.py), on SQLite and PostgreSQL: one row per run
rewritten in place, marked ended with its state, old ended rows removed when a run starts."""

from __future__ import annotations

import time

import sqlalchemy as sa
from baseline_fixtures import pg_server, store_url  # noqa: F401

from tokenpace.adapters.store import connect, normalize_url
from tokenpace.adapters.store import schema as s
from tokenpace.adapters.store.live import KEEP_ENDED_S
from tokenpace.adapters.store.migrations import migrate


def test_a_live_row_is_rewritten_in_place_then_marked_ended(store_url: str) -> None:  # noqa: F811
    store = connect(store_url)
    store.start_live("r1", "bench", {"model": "m", "team": "<b>x</b>"})
    started = store.get_live("r1")
    assert started is not None and started.figures == {} and started.state == "running"
    for done in (1, 2, 3):
        store.publish_live("r1", {"done": done})
    live = store.get_live("r1")
    assert live is not None and live.figures == {"done": 3} and not live.ended
    assert live.labels == {"model": "m", "team": "<b>x</b>"}
    assert [r.run_id for r in store.live_runs(ended=False)] == ["r1"]
    store.publish_live("r1", {"done": 4}, state="interrupted by the user", ended=True)
    assert store.live_runs(ended=False) == []
    ended = store.get_live("r1")
    assert ended is not None and ended.ended and ended.state == "interrupted by the user"
    assert ended.figures == {"done": 4} and ended.updated_unix >= live.updated_unix


def test_rows_not_written_for_a_day_go_when_a_run_starts(store_url: str) -> None:  # noqa: F811
    store = connect(store_url)
    for rid in ("old", "recent", "dead"):
        store.start_live(rid, "bench", {})
    store.publish_live("old", {}, state="completed", ended=True)
    store.publish_live("recent", {}, state="completed", ended=True)
    engine = sa.create_engine(normalize_url(store_url))
    with engine.begin() as conn:  # "old" ended, "dead" never did, both long ago
        t = s.live_runs
        past = time.time() - KEEP_ENDED_S - 60
        conn.execute(sa.update(t).where(t.c.run_id.in_(["old", "dead"])).values(updated_unix=past))
    engine.dispose()
    store.start_live("new", "sweep", {})
    assert sorted(r.run_id for r in store.live_runs()) == ["new", "recent"]  # a killed run's row too


def test_a_store_of_schema_6_gains_the_live_table(store_url: str) -> None:  # noqa: F811
    engine = sa.create_engine(normalize_url(store_url))
    with engine.begin() as conn:
        migrate(conn, target=6)
        assert not sa.inspect(conn).has_table("live_runs")
    engine.dispose()
    store = connect(store_url)
    assert store.migrated_from == 6 and store.schema_version() == s.SCHEMA_VERSION
    store.start_live("r", "bench", {})
    assert store.get_live("r") is not None
