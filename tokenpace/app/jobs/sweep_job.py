"""Use case: a sweep from config to stored result: the sweep id and files (the sweep JSON, saved
after every step, and each step's records beside it), the simulated engine when no URL is given,
the event loop, Ctrl-C, one stored run per step, and the exit status."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tokenpace.adapters.results import RecordWriter, rewrite_records, write_result
from tokenpace.adapters.safe_files import check_output
from tokenpace.app.baseline.run_store import open_for_run, save_run
from tokenpace.app.jobs.live_feed import failed_state, live_feed
from tokenpace.app.jobs.progress import NoProgress, SweepProgress
from tokenpace.app.run.exit_status import ExitDecision, sweep_exit_status, sweep_gate
from tokenpace.app.run.outputs import (
    ExitStatus,
    RunOutputs,
    default_result_path,
    new_run_id,
    step_records_path,
)
from tokenpace.app.run.run_loop import run_event_loop, stop_on_signals
from tokenpace.app.serving.simproc import SimProcess
from tokenpace.app.sweep.sweep import Sweep, SweepConfig, SweepResult, SweepStep
from tokenpace.app.workers.workers import AnyRun
from tokenpace.core.analysis.comparison.fail_on import FailOnLine
from tokenpace.core.record import RequestRecord

if TYPE_CHECKING:  # imported when used: --no-store sweeps never load SQLAlchemy
    from tokenpace.adapters.store import Store
    from tokenpace.app.watch.live import LiveFeed


@dataclass
class SweepOutcome:
    result: SweepResult
    doc: dict[str, Any]  # the sweep as written to ``out``
    out: Path | None

    @property
    def exit_decision(self) -> ExitDecision:
        """Interrupted or aborted as a whole, no success at any step, or NOT VALID at some step; else
        the --fail-on lines judged at every step of the curve (each step's own verdict in its JSON)."""
        curve = self.result.curve()
        outcomes = [s.result.outcome for s in curve]
        ran = sweep_exit_status(outcomes, self.result.interrupted, self.result.stop_reason)
        return sweep_gate(ran, [(s.index, s.result.fail_on) for s in curve])

    @property
    def exit_status(self) -> ExitStatus:
        return self.exit_decision.code


def run_sweep_job(
    config: SweepConfig,
    outputs: RunOutputs | None = None,
    sim_profile: str | None = None,
    progress: SweepProgress | None = None,
) -> SweepOutcome:
    """Run the sweep against ``config.base.url``, or the simulated engine when it is empty. Raises
    one of ``bench_job.REFUSALS`` (or ValueError for a bad config) before any load."""
    config.validate()
    config = dataclasses.replace(config, base=config.base.with_gate_percentiles())
    outputs = outputs or RunOutputs()
    sweep_id = new_run_id()
    out = (outputs.out or default_result_path(sweep_id, "sweep")) if outputs.write_files else None
    if out is not None:  # a device, a pipe or a read-only folder: refused before any load
        check_output(out, "--out")
        check_output(step_records_path(out, 0), "--out")
    store = open_for_run(outputs.store_url, outputs.save)  # before any load
    try:
        job = _SweepFiles(out, store, progress or NoProgress())
        if config.base.url:
            return job.run(config, sweep_id)
        base = dataclasses.replace(config.base, target=f"sim:{sim_profile or 'default'}")
        config = dataclasses.replace(config, base=base)
        with SimProcess(sim_profile) as url:
            base.url = url
            return job.run(config, sweep_id)
    finally:
        if store is not None:
            store.close()


class _SweepFiles:
    """Writes each step's records as they end, the sweep file after every step, and the store."""

    def __init__(self, out: Path | None, store: Store | None, progress: SweepProgress) -> None:
        self.out = out
        self.store = store
        self.progress = progress
        self.writers: dict[int, RecordWriter] = {}
        self.files: dict[int, str] = {}
        self.runner: Sweep | None = None
        self.duration_s: float | None = None
        self.gates: tuple[FailOnLine, ...] = ()
        self.labels: dict[str, str] = {}
        self.sweep_id = ""
        self.feeds: dict[int, LiveFeed] = {}  # the steps' live figures, one step at a time

    def run(self, config: SweepConfig, sweep_id: str) -> SweepOutcome:
        self.duration_s = config.base.duration_s
        self.gates = config.base.fail_on
        self.labels, self.sweep_id = dict(config.base.labels), sweep_id

        async def main() -> SweepResult:
            self.runner = Sweep(config, sweep_id, self.step_started, self.record, self.step_done)
            stop_on_signals(self.runner.stop)
            try:
                return await self.runner.run()
            except BaseException as exc:  # a step's live row ends with the sweep
                for feed in self.feeds.values():
                    feed.finish(failed_state(exc))
                raise

        result: SweepResult | None = None
        try:
            result = run_event_loop(main())
        finally:
            for w in self.writers.values():
                w.close()
                if result is None and w.count == 0:  # refused before any load: leave no empty file
                    w.path.unlink(missing_ok=True)
        doc = result.to_dict(self.files)
        if self.out is not None:
            write_result(self.out, doc)
        return SweepOutcome(result, doc, self.out)

    def step_started(self, index: int, phase: str, mode: str, load: float, run: AnyRun) -> None:
        if self.out is not None:
            path = step_records_path(self.out, index)
            self.writers[index] = RecordWriter(path)
            self.files[index] = path.name
        self.progress.step_started(index, phase, mode, load, run.total_planned, self.duration_s)
        step = {"sweep_id": self.sweep_id, "sweep_step": str(index), "sweep_phase": phase}
        feed = live_feed(run, "sweep", self.store, self.labels | step, self.progress)
        if feed is not None:
            self.feeds[index] = feed
            feed.start()

    def record(self, index: int, record: RequestRecord) -> None:
        writer = self.writers.get(index)
        if writer is not None:
            writer.write(record)
        feed = self.feeds.get(index)
        if feed is not None:
            feed.record(record)
        self.progress.record(record)

    def step_done(self, step: SweepStep) -> None:
        step.result.judge_gates(self.gates)  # each step's --fail-on verdict, in its JSON and the exit
        feed = self.feeds.pop(step.index, None)
        if feed is not None:
            feed.finish(step.result.stop_reason)
        writer = self.writers.get(step.index)
        if writer is not None:
            writer.close()
            if any(r.client_stall_ms is not None for r in step.result.records):  # marked after the step
                rewrite_records(writer.path, step.result.records)
        assert self.runner is not None
        if self.out is not None:
            write_result(self.out, self.runner.snapshot().to_dict(self.files))  # saved after every step
        problem = None
        if self.store is not None:  # each step is a full run in the store, labelled with its sweep
            report = save_run(self.store, step.result, kind="sweep")
            if not report.ok:
                where = self.out if self.out is not None else "the sweep's result"
                problem = f"{report.error}; it is in {where}"
        self.progress.step_finished(step, problem)
