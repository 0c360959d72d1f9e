"""`baseline set` refuses a run that is NOT VALID (exit 2, one line) unless --allow-invalid; the
record's client-stall mark survives the store."""

from __future__ import annotations

from pathlib import Path

from baseline_fixtures import make_record
from click.testing import CliRunner

from tokenpace.adapters.store import connect
from tokenpace.cli.main import cli


def _invoke(*args: str):
    return CliRunner().invoke(cli, list(args), env={"COLUMNS": "200"})


def _store(tmp_path: Path) -> str:
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    store = connect(db)
    records = [make_record(i, 100.0 + i, 10.0, 8) for i in range(20)]
    records[3].client_stall_ms = 12.5
    conditions = {"model": "m", "endpoint": "e", "labels": {}, "started_at": "2024-05-01T00:00:00+00:00"}
    store.save_run("good00000001", conditions, {"counts": {"ok": 20}}, records, labels={"side": "good"})
    store.save_run(
        "bad000000002", conditions, {"counts": {"ok": 20}}, records, labels={"side": "bad"}, valid=False,
        extra={"invalid_reasons": ["the client stalled during 9 of 20 requests (45.0% > the 5% tolerated)"]},
    )  # fmt: skip
    return db


def test_a_not_valid_run_is_refused_as_a_baseline_unless_allowed(tmp_path: Path) -> None:
    db = _store(tmp_path)
    refused = _invoke("baseline", "set", "prod", "side=bad", "--store", db)
    assert refused.exit_code == 2
    assert len(refused.output.strip().splitlines()) == 1 and "Traceback" not in refused.output
    assert "bad000000002 is NOT VALID (the client stalled during 9 of 20" in refused.output
    assert "--allow-invalid" in refused.output
    assert connect(db).baselines() == []  # nothing was set
    allowed = _invoke("baseline", "set", "prod", "side=bad", "--allow-invalid", "--store", db)
    assert allowed.exit_code == 0 and "baseline prod = run bad000000002" in allowed.output
    good = _invoke("baseline", "set", "rel", "side=good", "--store", db)
    assert good.exit_code == 0
    assert {b.name: b.run_id for b in connect(db).baselines()} == {
        "prod": "bad000000002",
        "rel": "good00000001",
    }


def test_the_client_stall_mark_round_trips_through_the_store(tmp_path: Path) -> None:
    records = connect(_store(tmp_path)).load_records("good00000001")
    assert [r.client_stall_ms for r in records[2:5]] == [None, 12.5, None]


def test_a_not_valid_member_of_a_repeat_group_that_stands_is_named(tmp_path: Path) -> None:
    # checks judge a baseline by its group, the NOT VALID members left out: the group still stands
    db = _store(tmp_path)
    connect(db).save_repeat_group("g1", ["good00000001", "bad000000002"], {"model": "m"}, "m", [])
    named = _invoke("baseline", "set", "prod", "side=bad", "--store", db)
    assert named.exit_code == 0 and "baseline prod = run bad000000002" in named.output
