"""`check` without `--run` judges the newest run measured like the baseline, not just the newest."""

from __future__ import annotations

from pathlib import Path

import pytest
from baseline_fixtures import make_record

from tokenpace.adapters.store import Store, StoreError, connect
from tokenpace.app.baseline.check import ConditionsDiffer, check
from tokenpace.core.analysis.comparison.conditions import gate_mismatches
from tokenpace.core.analysis.comparison.gate import parse_thresholds


def _conditions(input_len: str, started: str, endpoint: str = "http://a/v1") -> dict:
    return {"model": "m", "endpoint": endpoint, "api": "openai-chat", "started_at": started,
            "load": {"mode": "closed_loop", "concurrency": 16, "requests": 200},
            "workload": {"input_len": {"spec": input_len}, "output_len": {"spec": "128"}}}  # fmt: skip


def _save(store: Store, run_id: str, conditions: dict) -> None:
    store.save_run(run_id, conditions, {}, [make_record(i, 100.0 + i % 7) for i in range(200)])


def test_gate_mismatches_ignore_where_and_how_long_but_not_what_was_asked() -> None:
    base = _conditions("512", "2026-01-01")
    elsewhere = _conditions("512", "2026-02-01", endpoint="http://b/v1") | {"labels": {"who": "me"}}
    elsewhere["load"] = elsewhere["load"] | {"requests": 1000}
    assert gate_mismatches(base, elsewhere) == []
    assert gate_mismatches(base, _conditions("2048", "2026-02-01")) == ["workload.input_len.spec"]


def test_check_skips_a_newer_run_with_other_conditions(tmp_path: Path) -> None:
    store = connect(str(tmp_path / "runs.db"))
    _save(store, "base00000001", _conditions("512", "2026-01-01T00:00:00+00:00"))
    _save(store, "mine00000002", _conditions("512", "2026-01-02T00:00:00+00:00", endpoint="http://b/v1"))
    _save(store, "othr00000003", _conditions("2048", "2026-01-03T00:00:00+00:00"))
    store.set_baseline("prod", "base00000001")
    report = check(store, "prod", parse_thresholds("ttft.p95=5%"))
    assert report.run.b.id == "mine00000002"


def test_check_asks_for_run_when_no_run_matches(tmp_path: Path) -> None:
    store = connect(str(tmp_path / "runs.db"))
    _save(store, "base00000001", _conditions("512", "2026-01-01T00:00:00+00:00"))
    _save(store, "othr00000003", _conditions("2048", "2026-01-03T00:00:00+00:00"))
    store.set_baseline("prod", "base00000001")
    with pytest.raises(StoreError, match=r"differs in workload\.input_len\.spec.*--run"):
        check(store, "prod", parse_thresholds("ttft.p95=5%"))


def test_the_newest_candidate_is_never_a_run_of_the_baselines_own_repeat_group(tmp_path: Path) -> None:
    store = connect(str(tmp_path / "runs.db"))
    _save(store, "mine00000001", _conditions("512", "2026-01-01T00:00:00+00:00"))
    for i in (2, 3, 4):
        _save(store, f"base0000000{i}", _conditions("512", f"2026-01-0{i}T00:00:00+00:00"))
    store.save_repeat_group("g1", ["base00000002", "base00000003", "base00000004"], {}, "m", [])
    store.set_baseline("prod", "base00000002")
    report = check(store, "prod", parse_thresholds("ttft.p95=5%"))
    assert report.run.b.id == "mine00000001" and report.run.runs_a == ["base00000002", "base00000003",
                                                                        "base00000004"]  # fmt: skip


def test_check_refuses_a_candidate_measured_at_another_load_unless_told(tmp_path: Path) -> None:
    store = connect(str(tmp_path / "runs.db"))
    _save(store, "base00000001", _conditions("512", "2026-01-01T00:00:00+00:00"))
    eight = _conditions("512", "2026-01-02T00:00:00+00:00")
    eight["load"] = eight["load"] | {"concurrency": 8}
    _save(store, "c8xx00000002", eight)
    store.set_baseline("prod", "base00000001")
    with pytest.raises(ConditionsDiffer, match=r"load\.concurrency 8 vs the baseline's 16.*--allow-other"):
        check(store, "prod", parse_thresholds("ttft.p95=5%"), candidate="c8xx00000002")
    judged = check(store, "prod", parse_thresholds("ttft.p95=5%"), candidate="c8xx00000002",
                   allow_other_conditions=True)  # fmt: skip
    assert "judged although measured under other conditions: load.concurrency" in judged.run.warnings[0]
