"""Pages of runs for the console, on SQLite and PostgreSQL: labels, condition fields (numbers,
text, booleans: the same matches as ``runs --where``), validity, kinds and repeat groups, time,
bounded pages with the count of all matches; and a run's records sampled evenly."""

from __future__ import annotations

import pytest
from baseline_fixtures import make_record, pg_server, store_url  # noqa: F401

from tokenpace.adapters.store import RunQuery, connect
from tokenpace.adapters.store.protocol import PAGE_ROWS_MAX


def _conditions(day: int, concurrency: int, stream: bool, rate: float) -> dict:
    return {
        "model": "m", "api": "openai-chat", "stream": stream,
        "started_at": f"2026-02-{day:02d}T00:00:00+00:00",
        "load": {"mode": "closed_loop", "concurrency": concurrency, "rate": rate},
    }  # fmt: skip


@pytest.fixture
def store(store_url: str):  # noqa: F811
    s = connect(store_url)
    for day in range(1, 13):
        s.save_run(
            f"run{day:02d}", _conditions(day, 4 if day % 2 else 8, day != 3, 2.0 if day < 6 else 2.5),
            {"ttft_ms": {"p95": float(day)}}, [make_record(i, 10.0) for i in range(day)],
            labels={"team": "a" if day <= 6 else "b"}, valid=day != 4, kind="sweep" if day == 12 else "bench",
        )  # fmt: skip
    s.save_repeat_group("g", ["run10", "run11"], {}, "m", [])
    yield s
    s.close()


def _ids(store, **query) -> list[str]:
    return [r.id for r in store.page_runs(RunQuery(**query)).runs]


def test_filters_match_what_runs_where_matches(store) -> None:
    assert _ids(store, labels={"team": "a"}) == [f"run{d:02d}" for d in range(6, 0, -1)]
    assert _ids(store, conditions={"load.concurrency": "8"}) == [
        "run12",
        "run10",
        "run08",
        "run06",
        "run04",
        "run02",
    ]
    assert _ids(store, conditions={"stream": "false"}) == ["run03"]
    assert _ids(store, conditions={"load.rate": "2", "api": "OPENAI-CHAT"}) == [
        f"run{d:02d}" for d in range(5, 0, -1)
    ]
    assert _ids(store, conditions={"load.rate": "2.5", "model": "m"})[:2] == ["run12", "run11"]
    assert _ids(store, valid=False) == ["run04"]
    assert _ids(store, kinds=("repeat",)) == ["run11", "run10"]
    assert _ids(store, kinds=("sweep", "repeat")) == ["run12", "run11", "run10"]
    since = 1_770_000_000.0  # 2026-02-02T02:40Z
    assert _ids(store, since=since, until=since + 3 * 86400) == ["run05", "run04", "run03"]
    found = store.page_runs(RunQuery(labels={"team": "b"}, conditions={"load.concurrency": "4"}))
    assert (
        found.total == 3 and found.scanned_all and [r.id for r in found.runs] == ["run11", "run09", "run07"]
    )
    assert found.groups == {"run11": "g"} and found.runs[0].summary == {"ttft_ms": {"p95": 11.0}}


def test_pages_are_bounded_and_count_every_match(store) -> None:
    page = store.page_runs(RunQuery(offset=4, limit=3))
    assert page.total == 12 and [r.id for r in page.runs] == ["run08", "run07", "run06"]
    assert store.page_runs(RunQuery(conditions={"load.concurrency": "4"}, offset=5, limit=3)).total == 6
    assert len(store.page_runs(RunQuery(limit=10 * PAGE_ROWS_MAX)).runs) == 12


def test_records_sampled_evenly(store) -> None:
    assert [r.request_id for r in store.sample_records("run12", 4)] == ["r0", "r3", "r6", "r9"]
    assert len(store.sample_records("run05", 100)) == 5
    assert store.sample_records("nope", 10) == [] and store.sample_records("run05", 0) == []
