"""The run store on SQLite and on a real PostgreSQL server: same schema, same behaviour."""

from __future__ import annotations

import os
import stat

import pytest
import sqlalchemy as sa
from baseline_fixtures import make_record, pg_server, store_url  # noqa: F401

from tokenpace.adapters.store import StoreError, connect, normalize_url
from tokenpace.adapters.store import schema as s
from tokenpace.adapters.store.migrations import migrate
from tokenpace.core.record import Status


def _conditions(model: str = "m", started: str = "2024-05-01T10:00:00+00:00", **labels: str) -> dict:
    return {
        "model": model,
        "endpoint": "http://127.0.0.1:1/v1",
        "api": "openai-chat",
        "load": {"mode": "closed_loop", "concurrency": 4, "rate": None},
        "seed": 0,
        "labels": labels,
        "started_at": started,
        "tool": {"name": "tokenpace", "version": "0.1.0"},
    }


def _records(n: int, failed: int = 0, warmup: int = 0):
    out = [make_record(i, 50 + i % 7, warmup=i < warmup) for i in range(n)]
    out += [make_record(n + i, 0, status=Status.TIMEOUT) for i in range(failed)]
    return out


def test_save_and_read_back_every_record(store_url: str) -> None:  # noqa: F811
    store = connect(store_url)
    recs = _records(30, failed=3, warmup=2)
    recs[5].upstream_inflight = 7  # the gateway's load at dispatch: in the record's data, no column
    store.save_run("run1", _conditions(engine="vllm"), {"ttft_ms": {"p95": 55.0}}, recs, interrupted=True)
    info = store.get_run("run1")
    assert info is not None
    assert info.record_count == 33 and info.interrupted and info.labels == {"engine": "vllm"}
    assert info.summary == {"ttft_ms": {"p95": 55.0}}
    assert info.conditions["load"]["concurrency"] == 4
    back = store.load_records("run1")
    assert [r.to_dict() for r in back] == [r.to_dict() for r in recs]
    assert back[5].upstream_inflight == 7 and back[4].upstream_inflight is None
    assert store.record_counts("run1") == {"total": 33, "warmup": 2, "ok": 28, "timeout": 3}


def test_duplicate_run_is_refused_and_stores_nothing_twice(store_url: str) -> None:  # noqa: F811
    store = connect(store_url)
    store.save_run("dup", _conditions(), {}, _records(5))
    with pytest.raises(StoreError, match="already has a run dup"):
        store.save_run("dup", _conditions(), {}, _records(9))
    assert store.record_counts("dup")["total"] == 5


def test_filters_on_labels_columns_conditions_and_time(store_url: str) -> None:  # noqa: F811
    store = connect(store_url)
    store.save_run("a", _conditions("m1", "2024-05-01T00:00:00+00:00", engine="vllm", version="1"), {}, [])
    store.save_run("b", _conditions("m1", "2024-05-02T00:00:00+00:00", engine="vllm", version="2"), {}, [])
    store.save_run("c", _conditions("m2", "2024-05-03T00:00:00+00:00", engine="sglang"), {}, [])
    ids = lambda **kw: [r.id for r in store.list_runs(**kw)]  # noqa: E731
    assert ids() == ["c", "b", "a"]  # newest first
    assert ids(where={"engine": "vllm"}) == ["b", "a"]
    assert ids(where={"model": "m1", "version": "1"}) == ["a"]
    assert ids(where={"load.concurrency": "4", "engine": "sglang"}) == ["c"]
    assert ids(where={"load.concurrency": "8"}) == []
    t2 = store.get_run("b").started_unix  # type: ignore[union-attr]
    assert ids(since=t2) == ["c", "b"]
    assert ids(until=t2) == ["b", "a"]
    assert ids(limit=1, where={"engine": "vllm"}) == ["b"]
    assert ids(newest_first=False) == ["a", "b", "c"]


def test_labels_delete_baselines_and_references(store_url: str) -> None:  # noqa: F811
    store = connect(store_url)
    store.save_run("abcdef123456", _conditions(version="1"), {}, _records(4))
    store.save_run("abcdef999999", _conditions(started="2024-06-01T00:00:00+00:00", version="2"), {}, [])
    store.set_labels("abcdef123456", {"hardware": "h100", "version": "1.1"})
    store.remove_labels("abcdef123456", ["hardware"])
    assert store.get_run("abcdef123456").labels == {"version": "1.1"}  # type: ignore[union-attr]
    store.set_baseline("prod", "abcdef123456")
    assert store.resolve("prod").id == "abcdef123456"
    assert store.resolve("version=2").id == "abcdef999999"
    assert store.resolve("abcdef1").id == "abcdef123456"
    assert store.resolve("latest").id == "abcdef999999"
    with pytest.raises(StoreError, match="several run ids"):
        store.resolve("abcdef")
    with pytest.raises(StoreError, match="no run, baseline or label"):
        store.resolve("nope")
    with pytest.raises(StoreError, match="baseline prod"):
        store.delete_run("abcdef123456")
    assert store.unset_baseline("prod") and not store.unset_baseline("prod")
    store.delete_run("abcdef123456")
    assert store.get_run("abcdef123456") is None
    assert store.load_records("abcdef123456") == []
    assert [b.name for b in store.baselines()] == []


def test_old_schema_is_migrated_on_open(store_url: str) -> None:  # noqa: F811
    engine = sa.create_engine(normalize_url(store_url))
    with engine.begin() as conn:
        migrate(conn, target=1)  # a store written before baselines existed
        conn.execute(sa.insert(s.runs).values(
            id="old", kind="bench", started_at="2024-01-01T00:00:00+00:00", started_unix=1704067200.0,
            stored_unix=1704067200.0, interrupted=False, valid=True, record_count=0,
            conditions={}, summary={},
        ))  # fmt: skip
        assert not sa.inspect(conn).has_table("baselines")
    engine.dispose()
    store = connect(store_url)
    assert store.migrated_from == 1 and store.schema_version() == s.SCHEMA_VERSION
    assert store.get_run("old") is not None
    store.set_baseline("b", "old")  # the table added by the migration works
    assert connect(store_url).migrated_from == s.SCHEMA_VERSION  # nothing left to do


def test_newer_schema_is_refused(store_url: str) -> None:  # noqa: F811
    connect(store_url)
    engine = sa.create_engine(normalize_url(store_url))
    with engine.begin() as conn:
        conn.execute(sa.update(s.schema_version).values(version=99))
    engine.dispose()
    with pytest.raises(StoreError, match="newer than this tokenpace understands"):
        connect(store_url)


def test_unreachable_postgres_is_a_clear_error() -> None:
    with pytest.raises(
        StoreError, match=r"cannot open the store postgresql\+psycopg://u:\*\*\*@127.0.0.1:1/x"
    ):
        connect("postgresql://u:secret@127.0.0.1:1/x")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes read-only files anyway")
def test_read_only_sqlite_fails_the_write_check(tmp_path) -> None:
    path = tmp_path / "runs.db"
    connect(str(path))
    path.chmod(stat.S_IRUSR)
    store = connect(str(path))
    with pytest.raises(StoreError, match="cannot write to the store"):
        store.check_writable()


def test_unwritable_folder_is_a_clear_error(tmp_path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(StoreError, match="cannot"):
        connect(str(blocker / "sub" / "runs.db"))


def test_urls() -> None:
    assert normalize_url("postgresql://h/db") == "postgresql+psycopg://h/db"
    assert normalize_url("postgres://h/db") == "postgresql+psycopg://h/db"
    assert normalize_url("/tmp/x.db") == "sqlite:////tmp/x.db"
    with pytest.raises(StoreError, match="unsupported store URL"):
        normalize_url("mysql://h/db")


def test_read_only_postgres_user_fails_the_write_check(pg_server: int) -> None:  # noqa: F811
    import psycopg
    from baseline_fixtures import new_pg_database

    url = new_pg_database(pg_server)
    connect(url)
    with psycopg.connect(url, autocommit=True) as conn:
        role = "reader_" + url.rsplit("/", 1)[1]
        conn.execute(f"CREATE ROLE {role} LOGIN")
        conn.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {role}")
    store = connect(url.replace("tokenpace@", f"{role}@"))  # reading works
    assert store.list_runs() == []
    with pytest.raises(StoreError, match=r"cannot write to the store .*permission denied"):
        store.check_writable()
