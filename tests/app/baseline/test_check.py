"""`check`: undecided is exit 5 (bad input stays 2), and its advice counts the runs left out."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from baseline_fixtures import make_record

from tokenpace.adapters.store import connect
from tokenpace.app.baseline.check import check
from tokenpace.core.analysis.comparison.gate import parse_thresholds

CONDITIONS = {"model": "m", "endpoint": "e", "api": "chat", "load": {"concurrency": 16}}


def test_the_advice_counts_the_candidate_runs_left_out_as_not_valid(tmp_path: Path) -> None:
    store = connect(str(tmp_path / "runs.db"))
    rng = np.random.default_rng(5)
    for i, (name, valid) in enumerate((("base", True), ("c1", True), ("c2", False), ("c3", False))):
        records = [make_record(k, 100 * rng.lognormal(0, 0.05)) for k in range(200)]
        conditions = CONDITIONS | {"started_at": f"2026-01-0{i + 1}T00:00:00+00:00"}
        store.save_run(name, conditions, {}, records, valid=valid,
                       extra={"invalid_reasons": [] if valid else ["the client fell behind"]})  # fmt: skip
    store.save_repeat_group("g", ["c1", "c2", "c3"], CONDITIONS, "m", [])
    store.set_baseline("prod", "base")
    report = check(store, "prod", parse_thresholds("ttft.p50=10%"), candidate="c1")
    assert report.run.runs_b == ["c1"] and report.run.runs_left_out == 2 and report.run.runs_measured == 4
    (item,) = report.items
    assert item.outcome == "undecided" and report.exit_code == 5
    # "about 2 judged runs a side": half the runs were left out, so 4 are measured for 2 to count
    assert "about 2 judged runs a side would decide it" in item.reason and "bench --repeat 4" in item.reason
    assert (
        "2 of the 4 runs measured were left out (NOT VALID or interrupted), so measure about 4" in item.reason
    )
