"""Outcome events in the run store: schema step 3 on an older store; saved and read by time."""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa

from tokenpace.adapters.store import connect
from tokenpace.adapters.store import schema as s
from tokenpace.adapters.store.migrations import migrate
from tokenpace.adapters.store.url import normalize_url
from tokenpace.core.events import OutcomeEvent


def test_a_version_2_store_gains_the_events_table_and_keeps_events(tmp_path: Path) -> None:
    url = str(tmp_path / "runs.db")
    engine = sa.create_engine(normalize_url(url))
    with engine.begin() as conn:
        migrate(conn, target=2)  # written before outcome events existed
        assert not sa.inspect(conn).has_table("outcome_events")
    engine.dispose()
    store = connect(url)
    assert store.migrated_from == 2 and store.schema_version() == s.SCHEMA_VERSION >= 3
    events = [
        OutcomeEvent("accepted", "a", 100.0, request_id="r1", user="h1", upstream="a", session="s"),
        OutcomeEvent("complaint", "unknown", 200.0, request_id="r9", value=2.5, session="s"),
        OutcomeEvent("accepted", "b", 300.0, user="h2", upstream="b", session="t"),
    ]
    store.save_events(events)
    assert store.load_events(0.0) == events
    assert [e.unix_s for e in store.load_events(150.0)] == [200.0, 300.0]
    assert [e.unix_s for e in store.load_events(0.0, until_unix=300.0)] == [100.0, 200.0]
    assert [e.session for e in store.load_events(0.0, sessions=["t"])] == ["t"]
    store.close()


def test_configuration_changes_are_kept_and_read_back_by_window_and_session(tmp_path: Path) -> None:
    from tokenpace.core.events import ConfigChange

    store = connect(str(tmp_path / "runs.db"))
    before = {
        "split": [{"upstream": "a", "arm": "a", "weight": 99}, {"upstream": "b", "arm": "b", "weight": 1}]
    }
    after = {
        "split": [{"upstream": "a", "arm": "a", "weight": 95}, {"upstream": "b", "arm": "b", "weight": 5}]
    }
    store.save_config_change(ConfigChange("s1", 1, 100.0, "SIGHUP", ("slo",), before, before))
    store.save_config_change(ConfigChange("s1", 2, 200.0, "x" * 400, ("upstream",), before, after))
    store.save_config_change(ConfigChange("s2", 1, 300.0, "POST", ("upstream",), after, before))
    got = store.load_config_changes(150.0)
    assert [(c.session, c.epoch) for c in got] == [("s1", 2), ("s2", 1)]
    assert len(got[0].who) == 300 and ConfigChange.weights(got[0].after) == {"a": 95, "b": 5}
    assert [c.epoch for c in store.load_config_changes(0.0, 250.0, ["s1"])] == [1, 2]
