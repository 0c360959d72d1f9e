"""A bench that stores to the run store publishes its figures so far while it runs (a row rewritten
in place, at most once a second, off the event loop), to the store and to a display that shows
them, and ends the row with the run's state, a Ctrl-C too."""

from __future__ import annotations

import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from tokenpace.adapters.store import connect
from tokenpace.app.bench.bench import BenchConfig
from tokenpace.app.jobs.bench_job import run_bench_job
from tokenpace.app.jobs.progress import NoProgress
from tokenpace.app.run.outputs import RunOutputs
from tokenpace.core.analysis.diagnosis.live_figures import LiveSnapshot
from tokenpace.core.record import RequestRecord
from tokenpace.core.workload.lengths import parse_length
from tokenpace.testing.procs import cli_command


class Shown(NoProgress):
    """A display that shows the live figures (a ``LiveView``)."""

    def __init__(self) -> None:
        self.snapshots: list[LiveSnapshot] = []
        self.records = 0

    def record(self, record: RequestRecord) -> None:
        self.records += 1

    def live(self, snapshot: LiveSnapshot) -> None:
        self.snapshots.append(snapshot)


def _watch(url: str, seen: list[dict], stop: threading.Event) -> None:
    store = connect(url)
    while not stop.is_set():
        for live in store.live_runs():
            if not live.ended and live.figures and (not seen or seen[-1] != live.figures):
                seen.append(live.figures)
        time.sleep(0.1)
    store.close()


def test_a_stored_bench_publishes_its_figures_while_it_runs_then_ends_its_row(threaded_server, tmp_path):
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    config = BenchConfig(
        url=threaded_server.url, model="ok", concurrency=2, duration_s=3.5, output_len=parse_length("4")
    )
    shown, seen, stop = Shown(), [], threading.Event()
    watcher = threading.Thread(target=_watch, args=(url, seen, stop))
    connect(url).close()  # the schema, before the watcher reads it
    watcher.start()
    try:
        outcome = run_bench_job(config, RunOutputs(store_url=url, write_files=False), progress=shown)
    finally:
        stop.set()
        watcher.join()
    run_id = outcome.result.run_id
    store = connect(url)
    live = store.get_live(run_id)
    assert live is not None and live.ended and live.state == "completed" and live.kind == "bench"
    # the store saw the run's figures grow while it went, as its display did
    done = [f["done"] for f in seen]
    assert len(done) >= 2 and done == sorted(done) and done[0] < done[-1], done
    assert len(shown.snapshots) >= 2 and shown.snapshots[-1].done > shown.snapshots[0].done
    assert all(f["in_flight"] is not None for f in seen)
    assert any(f["p95"]["ttft_ms"] is not None and f["output_tokens_per_s"] > 0 for f in seen)
    # the final figures cover every measured record, and agree with the stored summary
    stored = store.get_run(run_id)
    assert stored is not None
    final = live.figures
    assert final["done"] == stored.summary["counts"]["sent"] == shown.records
    assert final["p50"]["ttft_ms"] == pytest.approx(stored.summary["ttft_ms"]["p50"], rel=0.02)
    assert final["p95"]["ttft_ms"] == pytest.approx(stored.summary["ttft_ms"]["p95"], rel=0.02)
    assert final["in_flight"] == 0 and final["skipped"] == 0


def test_no_store_and_no_display_publishes_nothing(threaded_server, tmp_path):
    config = BenchConfig(url=threaded_server.url, model="ok", concurrency=1, requests=3)
    outcome = run_bench_job(config, RunOutputs(save=False, write_files=False))
    assert len(outcome.result.records) == 3  # no feed: nothing was waiting to be read


def test_ctrl_c_ends_the_live_row_as_interrupted(threaded_server, tmp_path: Path):
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    connect(url).close()  # the schema, before the run and the test read it at once
    args = ("bench", "--url", threaded_server.url, "--model", "ok", "-c", "2", "--duration", "60", "-q")
    proc = subprocess.Popen(
        [*cli_command(*args), "--store", url],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        live = None
        while time.monotonic() < deadline:
            time.sleep(0.2)
            rows = connect(url).live_runs()
            if rows and rows[0].figures.get("done"):
                live = rows[0]
                break
        assert live is not None and not live.ended, "no live figures came"
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, stderr
    ended = connect(url).get_live(live.run_id)
    assert ended is not None and ended.ended and ended.state.startswith("interrupted"), ended
    assert ended.figures["done"] >= live.figures["done"]


def test_each_step_of_a_stored_sweep_has_its_live_row_labelled_with_its_sweep(threaded_server, tmp_path):
    from tokenpace.app.jobs.sweep_job import run_sweep_job
    from tokenpace.app.sweep.sweep import SweepConfig

    url = f"sqlite:///{tmp_path / 'runs.db'}"
    base = BenchConfig(url=threaded_server.url, model="ok", requests=6, output_len=parse_length("4"))
    config = SweepConfig(base=base, mode="concurrency", steps=[1, 2])
    outcome = run_sweep_job(config, RunOutputs(store_url=url, write_files=False))
    rows = sorted(connect(url).live_runs(), key=lambda r: r.labels["sweep_step"])
    assert [r.run_id for r in rows] == [s.result.run_id for s in outcome.result.steps]
    assert all(r.kind == "sweep" and r.ended and r.state == "completed" for r in rows)
    assert [r.labels["sweep_step"] for r in rows] == ["1", "2"]
    assert {r.labels["sweep_id"] for r in rows} == {outcome.result.steps[0].result.run_id.rsplit("-", 1)[0]}
    assert [r.figures["done"] for r in rows] == [6, 6]
