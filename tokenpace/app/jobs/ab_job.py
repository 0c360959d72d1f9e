"""Use case: an A/B run from config to stored result: the event loop, Ctrl-C, the result file, one
stored run per arm, and the exit status."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from tokenpace.adapters.results import write_result
from tokenpace.adapters.safe_files import check_output
from tokenpace.app.baseline.run_store import SaveReport, open_for_run
from tokenpace.app.rollout.ab import AbConfig, AbResult, AbRun
from tokenpace.app.run.bench_config import BenchResult
from tokenpace.app.run.outputs import ExitStatus
from tokenpace.app.run.run_loop import run_event_loop, stop_on_signals

if TYPE_CHECKING:
    from tokenpace.adapters.store import Store


@dataclass
class AbOutcome:
    result: AbResult
    saved: dict[str, SaveReport] = field(default_factory=dict)  # arm ("a"/"b") -> what the store said

    @property
    def exit_status(self) -> ExitStatus:
        if self.result.interrupted:
            return ExitStatus.INTERRUPTED
        if any(not report.ok for report in self.saved.values()):
            return ExitStatus.REFUSED
        return ExitStatus.OK


def run_ab_job(
    config: AbConfig,
    out: Path | None = None,
    store_url: str | None = None,
    save: bool = True,
    on_block: Callable[[int, str, BenchResult], None] | None = None,
) -> AbOutcome:
    """Run the blocks, write ``out`` when given, and store each arm. Raises one of
    ``bench_job.REFUSALS`` (or ValueError for a bad config) before any load."""
    config.validate()
    config.base.validate()
    if out is not None:
        check_output(out, "--out")  # a device, a pipe or a read-only folder: refused before any load
    store = open_for_run(store_url, save)  # before any load
    try:
        run = AbRun(config, on_block)

        async def main() -> AbResult:
            stop_on_signals(run.stop)
            return await run.run()

        result = run_event_loop(main(), prefer_uvloop=False)  # as A/B runs always did: plain asyncio
        if out is not None:
            write_result(out, result.to_dict())
        outcome = AbOutcome(result)
        if store is not None:
            for arm in ("a", "b"):
                report = save_ab_arm(store, result, arm)
                if report is not None:
                    outcome.saved[arm] = report
    finally:
        if store is not None:
            store.close()
    return outcome


def save_ab_arm(store: Store, result: AbResult, arm: str) -> SaveReport | None:
    """Save one arm of an A/B run over all its blocks; None when the arm measured nothing."""
    from tokenpace.adapters.store import StoreError

    if not result.blocks and arm.upper() not in result.partial:
        return None
    run_id, conditions, summary, records = result.arm_run(arm)
    try:
        store.save_run(run_id, conditions, summary, records, kind="ab", interrupted=result.interrupted)
    except StoreError as exc:
        return SaveReport(run_id, len(records), store.display_url, str(exc))
    return SaveReport(run_id, len(records), store.display_url)
