"""What the run commands (bench, sweep) show while a run goes: a progress bar refreshed from the
run's own event loop (no refresh thread competing with the client), and the store's answer."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from tokenpace.adapters.report.tables import fmt
from tokenpace.app.sweep_lengthen import is_short, step_rps
from tokenpace.core.record import RequestRecord, Status

if TYPE_CHECKING:
    from tokenpace.app.run_store import SaveReport
    from tokenpace.app.sweep import SweepStep

STORE_HELP = (
    "Save the run in this store: a SQLite path or URL, or postgresql://... "
    "(default: $TOKENPACE_STORE, else ~/.local/share/tokenpace/runs.db)."
)
REFRESH_S = 0.25


class BenchProgress:
    """A ``RunProgress`` drawn with rich: requests done of those planned, ok and failed."""

    def __init__(self, console: Console, quiet: bool) -> None:
        self.quiet = quiet
        self.progress = Progress(
            TextColumn("[bold]bench"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[status]}"),
            TimeElapsedColumn(),
            console=console,
            auto_refresh=False,
            transient=True,
        )
        self.task: TaskID | None = None
        self.ok = self.failed = 0
        self._ticker: asyncio.Task[Any] | None = None

    def started(self, total: int | None, duration_s: float | None) -> None:
        if self.quiet:
            return
        self.progress.start()
        self.task = self.progress.add_task("bench", total=total, status="")
        self._ticker = asyncio.get_running_loop().create_task(self._tick())

    async def _tick(self) -> None:
        while True:
            self.progress.refresh()
            await asyncio.sleep(REFRESH_S)

    def record(self, record: RequestRecord) -> None:
        if record.status is Status.OK:
            self.ok += 1
        else:
            self.failed += 1
        if self.task is not None:
            self.progress.update(
                self.task,
                advance=1,
                status=f"{self.ok} ok" + (f", {self.failed} failed" if self.failed else ""),
            )

    def finished(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
            self._ticker = None
        if not self.quiet:
            self.progress.stop()


class SweepView:
    """A ``SweepProgress``: a line and a progress bar per step, then the step's numbers."""

    def __init__(self, console: Console, quiet: bool) -> None:
        self.console = console
        self.quiet = quiet
        self.bar: BenchProgress | None = None

    def step_started(
        self, index: int, phase: str, mode: str, load: float, total: int | None, duration_s: float | None
    ) -> None:
        if not self.quiet:
            probe = {"probe": " (probe)", "revisit": " (revisit: drift check)"}.get(phase, "")
            self.console.print(f"[bold]step {index}[/]{probe} {load_label(mode, load)} ...", highlight=False)
        self.bar = BenchProgress(self.console, self.quiet)
        self.bar.started(total, duration_s)

    def record(self, record: RequestRecord) -> None:
        if self.bar is not None:
            self.bar.record(record)

    def step_finished(self, step: SweepStep, store_problem: str | None) -> None:
        if self.bar is not None:
            self.bar.finished()
        self.console.print(step_line(step), highlight=False)
        if store_problem is not None:
            self.console.print(
                f"[red]could not store step {step.index} (run {step.result.run_id}): {store_problem}[/]"
            )


def load_label(mode: str, load: float) -> str:
    if mode == "input_len":
        return f"input {int(load)} tokens"
    return f"c={int(load)}" if mode == "concurrency" else f"{load:g} req/s"


def step_line(step: SweepStep) -> str:
    s = step.result.summary
    phase = f" ({step.phase})" if step.phase in ("probe", "revisit") else ""
    line = (
        f"  step {step.index}{phase} {load_label(step.mode, step.load)}: {step_rps(step.result):.2f} req/s, "
        f"TTFT P95 {fmt(s.ttft_ms.p95)} ms, TPOT P95 {fmt(s.tpot_ms.p95)} ms, "
        f"E2E P95 {fmt(s.e2e_ms.p95)} ms, errors {s.error_rate:.1%}"
    )
    if not step.result.health.valid:
        line += "  [client NOT VALID]"
    if step.superseded:
        line += "  [short: rerun longer]"
    elif is_short(step.result):
        line += "  [short: left out]"
    if step.result.interrupted:
        line += "  [interrupted]"
    return line


def print_saved(console: Console, saved: SaveReport | None, cmd: str, out: object) -> None:
    """The store's answer after a bench run: where it is stored, or how to store it later."""
    if saved is None:
        return
    if saved.ok:
        console.print(
            f"stored as run {saved.run_id} ({saved.records} records) in {saved.where}", highlight=False
        )
        return
    click.echo(
        f"tokenpace {cmd}: error: could not store run {saved.run_id}: {saved.error}. "
        f"The result is in {out}; store it later with: tokenpace runs import {out}",
        err=True,
    )
