"""What the run commands (bench, sweep) show while a run goes: a progress bar refreshed from the
run's own event loop (no refresh thread competing with the client), and the store's answer."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from tokenpace.app.reports.tables import fmt, interval
from tokenpace.app.run.terms import LiveSnapshot, RequestRecord, Status
from tokenpace.app.sweep.sweep_lengthen import is_short, step_rps

if TYPE_CHECKING:
    from tokenpace.app.baseline.run_store import SaveReport
    from tokenpace.app.sweep.sweep import SweepStep

STORE_HELP = (
    "Save the run in this store: a SQLite path or URL, or postgresql://... "
    "(default: $TOKENPACE_STORE, else ~/.local/share/tokenpace/runs.db)."
)
REFRESH_S = 0.25


def clock(seconds: float) -> str:
    """12s, 3m05s, 1h02m."""
    s = max(0, round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def eta_s(elapsed_s: float, done: int, total: int | None, duration_s: float | None) -> float | None:
    """Seconds left: by the pace so far toward ``total`` requests, or to the end of ``duration_s``,
    whichever comes first (None before there is a pace to go by)."""
    left = []
    if total and done:
        left.append(elapsed_s * (total - done) / done)
    if duration_s:
        left.append(duration_s - elapsed_s)
    return max(0.0, min(left)) if left else None


class BenchProgress:
    """A ``RunProgress`` drawn with rich: requests done of those planned (or the time of a run bounded
    by duration), ok and failed, elapsed and an ETA; with the figures so far (``live``, once a second):
    TTFT P50/P95 and output tokens/s."""

    def __init__(self, console: Console, quiet: bool, label: str = "bench") -> None:
        self.quiet = quiet
        self.progress = Progress(
            TextColumn(f"[bold]{label}"),
            BarColumn(),
            TextColumn("{task.fields[count]}"),
            TextColumn("{task.fields[status]}"),
            TextColumn("{task.fields[figures]}"),
            TimeElapsedColumn(),
            TextColumn("{task.fields[eta]}"),
            console=console,
            auto_refresh=False,
            transient=True,
        )
        self.task: TaskID | None = None
        self.ok = self.failed = 0
        self.total: int | None = None
        self.duration_s: float | None = None
        self.t0 = 0.0
        self._ticker: asyncio.Task[Any] | None = None
        self.figures = ""

    def started(self, total: int | None, duration_s: float | None) -> None:
        self.total, self.duration_s, self.t0 = total, duration_s, time.monotonic()
        if self.quiet:
            return
        self.progress.start()
        bar_total = total if total else duration_s  # a run bounded by duration only: a bar of time
        self.task = self.progress.add_task("bench", total=bar_total, status="", count="", eta="", figures="")
        self._ticker = asyncio.get_running_loop().create_task(self._tick())

    async def _tick(self) -> None:
        while True:
            self.refresh()
            await asyncio.sleep(REFRESH_S)

    def refresh(self) -> None:
        """Draw the counts so far: once every REFRESH_S, not once a record (rich's update is a few
        microseconds, and 256 streams end 256 requests at once, inside the measuring loop)."""
        if self.task is not None:
            elapsed = time.monotonic() - self.t0
            done = self.ok + self.failed
            left = eta_s(elapsed, done, self.total, self.duration_s)
            failed = f", {self.failed} failed" if self.failed else ""
            fields: dict[str, Any] = {
                "eta": f"ETA {clock(left)}" if left is not None else "",
                "count": f"{done}",
                "status": f"{self.ok} ok{failed}" if done else "",
                "figures": self.figures,
            }
            if self.total:
                fields["count"] = f"{done}/{self.total}"
                fields["completed"] = done
            else:
                fields["completed"] = min(elapsed, self.duration_s or 0.0)
            self.progress.update(self.task, **fields)
        self.progress.refresh()

    def record(self, record: RequestRecord) -> None:
        """Counted only; ``refresh`` draws it."""
        if record.status is Status.OK:
            self.ok += 1
        else:
            self.failed += 1

    def live(self, snapshot: LiveSnapshot) -> None:
        """The figures so far (``refresh`` draws them)."""
        self.figures = live_figures(snapshot)

    def finished(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
            self._ticker = None
        if not self.quiet:
            self.progress.stop()


def live_figures(snapshot: LiveSnapshot) -> str:
    """TTFT P50/P95 and output tokens/s (over the last second), and P95 of TPOT: empty before any
    request succeeded."""
    p50, p95 = snapshot.p50.get("ttft_ms"), snapshot.p95.get("ttft_ms")
    if p50 is None or p95 is None:
        return ""
    line = f"TTFT P50 {fmt(p50)} P95 {fmt(p95)} ms, {snapshot.recent_tokens_per_s:,.0f} tok/s"
    tpot = snapshot.p95.get("tpot_ms")
    if tpot is not None:
        line += f", TPOT P95 {fmt(tpot)} ms"
    return line


class SweepView:
    """A ``SweepProgress``: a line and a progress bar per step, then the step's numbers."""

    def __init__(self, console: Console, quiet: bool, planned_steps: int | None = None) -> None:
        self.console = console
        self.quiet = quiet
        self.planned = planned_steps  # the listed steps (None: --auto places them as it goes)
        self.bar: BenchProgress | None = None
        self.t0: float | None = None
        self.curve_done = 0  # curve steps finished (probes and short attempts take time, not places)

    def step_started(
        self, index: int, phase: str, mode: str, load: float, total: int | None, duration_s: float | None
    ) -> None:
        if self.t0 is None:
            self.t0 = time.monotonic()
        if not self.quiet:
            probe = {"probe": " (probe)", "revisit": " (revisit: drift check)"}.get(phase, "")
            self.console.print(
                f"[bold]step {index}[/]{probe} {load_label(mode, load)} ...{self._overall()}", highlight=False
            )
        self.bar = BenchProgress(self.console, self.quiet, label=f"step {index}")
        self.bar.started(total, duration_s)

    def _overall(self) -> str:
        """The sweep so far, and its ETA when the steps are listed (by the pace of those done)."""
        elapsed = time.monotonic() - (self.t0 or time.monotonic())
        if not self.planned:
            return f"  ({self.curve_done} steps done, {clock(elapsed)} so far)" if self.curve_done else ""
        left = eta_s(elapsed, self.curve_done, self.planned, None)
        eta = f", sweep ETA {clock(left)}" if left is not None else ""
        return f"  ({self.curve_done} of {self.planned} steps done{eta})"

    def record(self, record: RequestRecord) -> None:
        if self.bar is not None:
            self.bar.record(record)

    def live(self, snapshot: LiveSnapshot) -> None:
        if self.bar is not None:
            self.bar.live(snapshot)

    def step_finished(self, step: SweepStep, store_problem: str | None) -> None:
        if self.bar is not None:
            self.bar.finished()
        if step.phase == "step" and not step.superseded:
            self.curve_done += 1
        self.console.print(step_line(step), highlight=False)
        if store_problem is not None:
            self.console.print(
                f"[red]could not store step {step.index} (run {step.result.run_id}): {store_problem}[/]"
            )


def load_label(mode: str, load: float) -> str:
    if mode == "input_len":
        return f"input {int(load)} tokens"
    return f"c={int(load)}" if mode == "concurrency" else f"{load:g} req/s"


def _p95(dist: Any) -> str:
    """P95 with its 95 % interval, compactly: 19.5 [14.4, 20.4]."""
    return f"{fmt(dist.p95)} {interval(dist.ci95.get('p95'))}".strip()


def step_line(step: SweepStep) -> str:
    s = step.result.summary
    phase = f" ({step.phase})" if step.phase in ("probe", "revisit") else ""
    line = (
        f"  step {step.index}{phase} {load_label(step.mode, step.load)}: {step_rps(step.result):.2f} req/s, "
        f"TTFT P95 {_p95(s.ttft_ms)} ms, TPOT P95 {_p95(s.tpot_ms)} ms, "
        f"E2E P95 {_p95(s.e2e_ms)} ms, errors {s.error_rate:.1%}"
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
