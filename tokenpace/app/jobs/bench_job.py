"""Use case: one benchmark from config to stored result. Owns the run id, the result and records
files, the simulated engine's lifecycle (when no URL is given), the event loop, Ctrl-C, the store
and the exit status; the caller gives options and shows what comes back."""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tokenpace.adapters.results import (
    RecordWriter,
    check_result_paths,
    records_path_for,
    rewrite_records,
    scrapes_path_for,
    write_result,
)
from tokenpace.adapters.safe_files import OutputPathError
from tokenpace.adapters.vllm_json import check_export, vllm_result, write_export
from tokenpace.app.baseline.run_store import RunStoreError, SaveReport, open_for_run, save_run
from tokenpace.app.bench.bench import BenchConfig, BenchResult
from tokenpace.app.jobs.live_feed import failed_state, live_feed
from tokenpace.app.jobs.progress import NoProgress, RunProgress
from tokenpace.app.run.exit_status import ExitDecision, run_exit_status, with_gate
from tokenpace.app.run.outputs import ExitStatus, RunOutputs, default_result_path, new_run_id
from tokenpace.app.run.run_loop import run_event_loop, stop_on_signals
from tokenpace.app.serving.simproc import SimProcess, SimStartError
from tokenpace.app.watch.client_traces import check_tracing, export_client_spans
from tokenpace.app.watch.preflight import PreflightError
from tokenpace.app.workers.run_factory import make_run
from tokenpace.core.record import RequestRecord
from tokenpace.wire.endpoint import EndpointError

if TYPE_CHECKING:
    from tokenpace.adapters.store import Store
    from tokenpace.app.watch.live import LiveFeed

# A run refused before any load: bad target, simulator that did not start, store not writable.
REFUSALS = (PreflightError, SimStartError, EndpointError, RunStoreError, OutputPathError)


@dataclass
class BenchOutcome:
    result: BenchResult
    out: Path | None  # the result file (None: no files written)
    records_path: Path | None
    saved: SaveReport | None  # None: not saved (--no-store)

    @property
    def exit_decision(self) -> ExitDecision:
        """The exit status and its reason: a run that did not measure what was asked is no success;
        one that did, judged by its --fail-on lines."""
        ran = run_exit_status(self.result.outcome, stored=self.saved is None or self.saved.ok)
        return with_gate(ran, self.result.fail_on)

    @property
    def exit_status(self) -> ExitStatus:
        return self.exit_decision.code


def run_bench_job(
    config: BenchConfig,
    outputs: RunOutputs | None = None,
    sim_profile: str | None = None,
    progress: RunProgress | None = None,
    run_id: str | None = None,
) -> BenchOutcome:
    """Run one benchmark against ``config.url``, or the simulated engine (``sim_profile``) when it
    is empty. Raises one of ``REFUSALS`` (or ValueError for a bad config) before any load."""
    config.validate()
    config = config.with_gate_percentiles()
    check_tracing(config.otlp_endpoint)
    outputs = outputs or RunOutputs()
    run_id = run_id or new_run_id()
    out = (outputs.out or default_result_path(run_id)) if outputs.write_files else None
    if out is not None:
        check_result_paths(out)  # a device, a pipe or a read-only folder: refused before any load
    if outputs.vllm is not None:
        check_export(outputs.vllm)
    store = open_for_run(outputs.store_url, outputs.save)  # before any load is sent
    try:
        if config.url:
            result = _measure(config, run_id, out, progress or NoProgress(), store)
        else:
            config = dataclasses.replace(config, target=f"sim:{sim_profile or 'default'}")
            with SimProcess(sim_profile) as url:
                config.url = url
                result = _measure(config, run_id, out, progress or NoProgress(), store)
        if config.otlp_endpoint:  # bounded: a hanging collector costs at most CLOSE_TIMEOUT_S
            queued, dropped = export_client_spans(result.records, config.otlp_endpoint, config.model or "")
            if dropped:
                print(f"spans: {queued - dropped} exported, {dropped} dropped", file=sys.stderr)
        if outputs.vllm is not None:
            export = outputs.vllm
            texts = result.texts if result.texts or config.keep_texts else None
            vllm = vllm_result(
                result.records, result.summary, result.conditions, export.metrics, export.percentiles,
                export, texts,
            )  # fmt: skip
            write_export(export, vllm)
        saved = save_run(store, result) if store is not None else None  # also when interrupted
    finally:
        if store is not None:
            store.close()
    return BenchOutcome(result, out, records_path_for(out) if out else None, saved)


def _measure(
    config: BenchConfig, run_id: str, out: Path | None, progress: RunProgress, store: Store | None
) -> BenchResult:
    """The run on its event loop; every record is written as it ends, the result file after; the
    figures so far published while it goes (``app/watch/live.py``)."""
    writer = RecordWriter(records_path_for(out)) if out is not None else None
    feed: LiveFeed | None = None

    def on_record(record: RequestRecord) -> None:
        if writer is not None:
            writer.write(record)
        if feed is not None:
            feed.record(record)
        progress.record(record)

    async def main() -> BenchResult:
        nonlocal feed
        scrapes = scrapes_path_for(out) if out is not None else None
        run = make_run(config, on_record=on_record, run_id=run_id, scrape_path=scrapes)
        stop_on_signals(run.stop)
        feed = live_feed(run, "bench", store, config.labels, progress)
        progress.started(run.total_planned, config.duration_s)
        if feed is not None:
            feed.start()
        state = "failed"
        try:
            result = await run.run()
            state = result.stop_reason
            return result
        except BaseException as exc:
            state = failed_state(exc)
            raise
        finally:
            if feed is not None:
                feed.finish(state)
            progress.finished()

    result: BenchResult | None = None
    try:
        result = run_event_loop(main())
    finally:
        if writer is not None:
            writer.close()
            if result is None and writer.count == 0:  # refused before any load: leave no empty file
                writer.path.unlink(missing_ok=True)
    result.judge_gates(config.fail_on)
    if out is not None:
        if any(r.client_stall_ms is not None for r in result.records):  # marked after the run
            rewrite_records(records_path_for(out), result.records)
        write_result(out, result.to_dict(records_file=records_path_for(out).name))
    return result
