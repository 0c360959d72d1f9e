"""What the app's run jobs decide for the commands: the exit status of a run, a store that refuses
a finished run (the run is kept, the status says so), and a run refused before any load (no files)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from tokenpace.adapters.store import StoreError
from tokenpace.app.baseline.run_store import RunStoreError, SaveReport, open_for_run, save_run
from tokenpace.app.bench.bench import BenchConfig, BenchRun
from tokenpace.app.jobs.bench_job import REFUSALS, BenchOutcome, run_bench_job
from tokenpace.app.run.exit_status import RunOutcome
from tokenpace.app.run.outputs import ExitStatus, RunOutputs
from tokenpace.core.workload.lengths import parse_length
from tokenpace.testing.procs import free_port


@pytest.mark.parametrize(
    ("interrupted", "stop_reason", "saved", "status", "client_valid", "ok"),
    [
        (False, "completed", None, ExitStatus.OK, True, 3),
        (False, "completed", SaveReport("r", 3, "db"), ExitStatus.OK, True, 3),
        (False, "completed", SaveReport("r", 3, "db", "disk full"), ExitStatus.REFUSED, True, 3),
        (False, "aborted: 50 requests in a row could not connect", None, ExitStatus.ABORTED, True, 0),
        (
            True,
            "interrupted by the user",
            SaveReport("r", 3, "db", "disk full"),
            ExitStatus.INTERRUPTED,
            True,
            3,
        ),
        (False, "completed", None, ExitStatus.NOT_VALID, False, 3),
        (False, "completed", None, ExitStatus.NO_SUCCESS, True, 0),
    ],
)
def test_exit_status_of_a_bench_run(interrupted, stop_reason, saved, status, client_valid, ok):
    outcome_of_run = RunOutcome(interrupted, stop_reason, client_valid, 3, ok)
    result = SimpleNamespace(
        interrupted=interrupted, stop_reason=stop_reason, outcome=outcome_of_run, fail_on=None
    )  # no --fail-on: the run's own status
    outcome = BenchOutcome(result, None, None, saved)  # type: ignore[arg-type]
    assert outcome.exit_status is status
    codes = {"OK": 0, "ABORTED": 1, "REFUSED": 2, "NOT_VALID": 3, "NO_SUCCESS": 4, "INTERRUPTED": 130}
    assert int(outcome.exit_status) == codes[status.name]


class RefusingStore:
    display_url = "sqlite:///full.db"

    def save_run(self, *args, **kwargs):
        raise StoreError("database or disk is full")


def test_a_store_that_refuses_the_run_is_reported_not_raised(threaded_server):
    config = BenchConfig(
        url=threaded_server.url, model="ok", concurrency=2, requests=3, output_len=parse_length("4")
    )
    result = asyncio.run(BenchRun(config).run())
    report = save_run(RefusingStore(), result)  # type: ignore[arg-type]
    assert not report.ok and "disk is full" in (report.error or "")
    assert report.run_id == result.run_id and report.records == 3


def test_no_store_opens_nothing_and_an_unwritable_one_refuses_before_load(tmp_path):
    assert open_for_run(str(tmp_path / "never.db"), save=False) is None
    assert not (tmp_path / "never.db").exists()
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(RunStoreError, match="no load was sent"):
        open_for_run(str(blocker / "runs.db"))


def test_a_refused_run_leaves_no_files(tmp_path):
    config = BenchConfig(url=f"http://127.0.0.1:{free_port()}/v1", model="m", concurrency=1, requests=1)
    with pytest.raises(REFUSALS, match="cannot reach"):
        run_bench_job(config, RunOutputs(out=tmp_path / "r.json", save=False))
    assert list(tmp_path.iterdir()) == []
