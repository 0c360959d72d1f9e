"""Each run's stored figures (adapters/store/levels.py), on SQLite and PostgreSQL: kept beside the
run, replaced whole, read for many runs at once, removed with the run; a store of schema 7 gains
the table and keeps everything it had."""

from __future__ import annotations

import sqlalchemy as sa
from baseline_fixtures import make_record, pg_server, store_url  # noqa: F401

from tokenpace.adapters.store import connect, normalize_url
from tokenpace.adapters.store import schema as s
from tokenpace.adapters.store.migrations import migrate
from tokenpace.core.analysis.comparison.stored_levels import RunLevel

CONDITIONS = {"model": "m", "started_at": "2026-01-01T00:00:00+00:00"}


def test_figures_are_kept_replaced_and_removed_with_their_run(store_url: str) -> None:  # noqa: F811
    store = connect(store_url)
    for rid in ("a", "b"):
        store.save_run(rid, CONDITIONS, {}, [make_record(0, 100.0)])
    first = [RunLevel("ttft.p50", 120, 101.5, 2.5, 80.0), RunLevel("ttft.p99", 120, 140.0, None, 31.5)]
    store.save_levels("a", first)
    store.save_levels("b", first[:1])
    store.save_levels("b", [RunLevel("e2e.p95", 120, 300.0, 9.0, 120.0)])  # in place of the old
    got = store.run_levels(["a", "b", "none"])
    assert got == {
        "a": {v.key: v for v in first},
        "b": {"e2e.p95": RunLevel("e2e.p95", 120, 300.0, 9.0, 120.0)},
    }
    store.delete_run("a")
    assert store.run_levels(["a", "b"]).keys() == {"b"}


def test_a_store_of_schema_7_gains_the_figures_table(store_url: str) -> None:  # noqa: F811
    engine = sa.create_engine(normalize_url(store_url))
    with engine.begin() as conn:
        migrate(conn, target=7)
        assert not sa.inspect(conn).has_table("run_levels")
    engine.dispose()
    old = connect(store_url)  # migrated here; a run saved, then the figures kept beside it
    old.save_run("old", CONDITIONS, {}, [make_record(0, 100.0)])
    assert old.migrated_from == 7 and old.schema_version() == s.SCHEMA_VERSION == 8
    assert old.run_levels(["old"]) == {} and old.get_run("old") is not None
    old.save_levels("old", [RunLevel("ttft.p50", 1, 100.0, None, 1.0)])
    assert old.run_levels(["old"])["old"]["ttft.p50"].value == 100.0
