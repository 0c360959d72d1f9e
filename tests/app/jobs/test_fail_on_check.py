"""`check --fail-on`: a stored run judged on absolute lines by its stored intervals, alone or beside
the relative gate; a run NOT VALID is refused unless allowed; one exit code for both gates."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from baseline_fixtures import make_record
from click.testing import CliRunner

from tokenpace.adapters.store import connect
from tokenpace.app.jobs.fail_on_check import judge_stored, stored_run
from tokenpace.app.run.terms import parse_fail_on
from tokenpace.cli.main import cli
from tokenpace.core.metrics import summarize

CONDITIONS = {"model": "m", "endpoint": "e", "api": "chat", "load": {"concurrency": 16}}


def _store(path: Path) -> str:
    """Two runs of 300 requests, TTFT about 60 ms; the newest, 'late', marked NOT VALID."""
    db = f"sqlite:///{path / 'runs.db'}"
    store = connect(db)
    rng = np.random.default_rng(3)
    for i, (name, valid) in enumerate((("early", True), ("late", False))):
        records = [make_record(k, 60 * rng.lognormal(0, 0.05)) for k in range(300)]
        conditions = CONDITIONS | {"started_at": f"2024-06-0{i + 1}T00:00:00+00:00"}
        store.save_run(name, conditions, summarize(records).to_dict(), records, valid=valid,
                       extra={"invalid_reasons": [] if valid else ["the client fell behind"]})  # fmt: skip
    store.set_baseline("prod", "early")
    store.close()
    return db


def test_a_stored_run_is_judged_on_its_stored_intervals(tmp_path: Path) -> None:
    store = connect(_store(tmp_path))
    run = stored_run(store, "early", None)
    assert judge_stored(run, parse_fail_on("ttft.p95<80ms,error_rate<2%"), False).outcome == "pass"
    assert judge_stored(run, parse_fail_on("ttft.p50<50ms"), False).outcome == "fail"
    assert judge_stored(run, parse_fail_on("ttft.p99<80ms"), False).outcome == "undecided"  # 300 < 500
    newest = stored_run(store, None, None)
    assert newest.id == "late" and newest.summary["ttft_ms"]["n"] == 300  # resolved with its summary
    with pytest.raises(ValueError, match="run late is NOT VALID: the client fell behind"):
        judge_stored(newest, parse_fail_on("ttft.p95<80ms"), False)
    assert judge_stored(newest, parse_fail_on("ttft.p95<80ms"), True).outcome == "pass"


def test_check_fail_on_exits_by_the_gate_and_combines_with_the_relative_one(tmp_path: Path) -> None:
    env = {"TOKENPACE_STORE": _store(tmp_path), "COLUMNS": "200"}
    run = CliRunner().invoke
    passed = run(cli, ["check", "--fail-on", "ttft.p95<80ms", "--run", "early"], env=env)
    assert passed.exit_code == 0 and "fail-on PASS: ttft.p95 (ttft.p95<80ms)" in passed.output
    missed = run(cli, ["check", "--fail-on", "ttft.p50<50ms", "--run", "early", "-q"], env=env)
    assert missed.exit_code == 1 and missed.output.startswith("fail-on FAIL: ttft.p50")
    refused = run(cli, ["check", "--fail-on", "ttft.p95<80ms"], env=env)  # the newest: NOT VALID
    assert refused.exit_code == 2 and "NOT VALID" in refused.output
    # beside a relative gate the candidate passes (the same server), the absolute line decides
    both = ["check", "--baseline", "prod", "--max-regression", "ttft.p50=50%", "--run", "early"]
    out = tmp_path / "check.json"
    done = run(cli, [*both, "--fail-on", "ttft.p50<50ms", "--out", str(out)], env=env)
    assert done.exit_code == 1, done.output
    doc = json.loads(out.read_text())
    assert doc["exit_code"] == 1 and doc["fail_on"]["decided_by"] == "ttft.p50" and doc["checks"]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        ([], "give --max-regression (against --baseline) and/or --fail-on"),
        (["--max-regression", "ttft.p50=5%"], "--max-regression needs --baseline"),
        (["--fail-on", "ttft.p50>5ms"], "upper line"),
        (["--fail-on", "ttft.p50<5ms", "--until-decided"], "without --out or --fail-on"),
    ],
)
def test_bad_input_is_one_line_exit_2(args: list[str], says: str, tmp_path: Path) -> None:
    done = CliRunner().invoke(cli, ["check", *args], env={"TOKENPACE_STORE": _store(tmp_path)})
    assert done.exit_code == 2 and says in done.output and "Traceback" not in done.output
