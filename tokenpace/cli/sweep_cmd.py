"""`tokenpace sweep`: a ladder of bench runs (concurrency or rate steps), the knee and the plan."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, NoReturn

import click
from rich import box
from rich.console import Console
from rich.table import Table

from tokenpace.adapters.report.tables import fmt, plan_lines, steps_table
from tokenpace.adapters.results import RecordWriter, records_path_for, write_result
from tokenpace.adapters.safe_files import check_output
from tokenpace.adapters.store import Store, StoreError
from tokenpace.app.bench import SIGTERM_STOP, USER_STOP, BenchRun
from tokenpace.app.preflight import PreflightError
from tokenpace.app.simproc import SimProcess, SimStartError
from tokenpace.app.store_ops import save_result
from tokenpace.app.sweep import Sweep, SweepConfig, SweepResult, SweepStep
from tokenpace.cli import bench_store
from tokenpace.cli.bench_cmd import EXIT_TERMINATED, _config, _event_loop_run, _Progress, bench
from tokenpace.client import EndpointError
from tokenpace.core.record import RequestRecord

EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130
# bench options a sweep sets per step (or names differently)
_NOT_SHARED = {"concurrency", "rate", "out", "quiet", "request_id_prefix"}


def fraction(text: str, what: str) -> float:
    """'30%' or '0.3' -> 0.3."""
    t = text.strip()
    try:
        return float(t[:-1]) / 100 if t.endswith("%") else float(t)
    except ValueError:
        raise click.BadParameter(f"{text!r} is not a {what}; use e.g. 30% or 0.3") from None


def load_list(text: str, what: str) -> list[float] | None:
    """'1,2,4' -> [1, 2, 4]; 'auto' -> None."""
    if text.strip().lower() == "auto":
        return None
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise click.BadParameter(f"{what} {text!r}: give a list like 1,2,4,8 or 'auto'") from None
    if not values:
        raise click.BadParameter(f"{what}: give a list like 1,2,4,8 or 'auto'")
    return values


def step_records_path(out: Path, index: int) -> Path:
    return records_path_for(out).with_name(
        records_path_for(out).name.replace(".records.jsonl", f".step{index:02d}.records.jsonl")
    )


@click.command()
@click.option("--concurrency", "-c", "concurrency_steps", help="Closed-loop steps: 1,2,4,8,16 (or auto).")
@click.option("--rate", "-r", "rate_steps", help="Open-loop steps in requests/s, e.g. 1,2,5,10 (or auto).")
@click.option(
    "--auto",
    is_flag=True,
    help="Find the maximum sustainable throughput (closed-loop doubling), then place open-loop "
    "rate steps up to it (same as --rate auto; --concurrency auto doubles users only).",
)
@click.option("--auto-steps", type=int, default=8, show_default=True, help="Rate steps placed by --auto.")
@click.option(
    "--slo-percentile",
    type=click.Choice(["p50", "p90", "p95", "p99"]),
    default="p95",
    show_default=True,
    help="Percentile that must meet the SLO for a step to count toward max goodput.",
)
@click.option("--stop-error-rate", default="5%", show_default=True, help="Stop above this error rate.")
@click.option(
    "--slo-break",
    type=float,
    default=3.0,
    show_default=True,
    help="Stop the sweep when an SLO percentile is this many times over its limit.",
)
@click.option("--keep-going", is_flag=True, help="Run every listed step even when errors climb.")
@click.option("--peak-rps", type=float, help="Peak traffic to plan replicas for.")
@click.option("--headroom", default="30%", show_default=True, help="Headroom under the ceiling per replica.")
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Sweep JSON (steps in the bench --out format, knee, plan); step records beside it "
    "(default results/sweep-TIME-ID.json).",
)
@click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
def sweep(**opts: Any) -> None:
    """Sweep the load: one full bench run per step, then the knee, max goodput and the capacity plan."""
    try:
        config = _sweep_config(opts)
        config.validate()
    except (click.BadParameter, ValueError, EndpointError) as exc:
        _die(str(exc))
    store = bench_store.open_for_run(opts["store_url"], opts["no_store"], cmd="sweep")  # before any load
    console = Console()
    sweep_id = uuid.uuid4().hex[:12]
    stamp = f"{datetime.now(timezone.utc):%Y%m%dT%H%M%SZ}"
    out = opts["out"] or Path("results") / f"sweep-{stamp}-{sweep_id}.json"
    try:  # a device, a pipe or a read-only folder: refused before any load
        check_output(out, "--out")
        check_output(step_records_path(out, 0), "--out")
    except OSError as exc:
        _die(str(exc))
    try:
        if config.base.url:
            result = _run(config, sweep_id, out, console, opts["quiet"], store)
        else:
            config.base.target = f"sim:{opts['sim_profile'] or 'default'}"
            with SimProcess(opts["sim_profile"]) as url:
                config.base.url = url
                result = _run(config, sweep_id, out, console, opts["quiet"], store)
    except (PreflightError, SimStartError, EndpointError) as exc:
        _die(str(exc))
    if result.interrupted:
        sys.exit(EXIT_TERMINATED if result.stop_reason == SIGTERM_STOP else EXIT_INTERRUPTED)


# the bench options (target, workload, bounds per step, SLO, ...) come first in --help
sweep.params = [p for p in bench.params if p.name not in _NOT_SHARED] + sweep.params


def _sweep_config(o: dict[str, Any]) -> SweepConfig:
    conc, rate = o["concurrency_steps"], o["rate_steps"]
    if conc and rate:
        raise click.BadParameter("--concurrency and --rate are two sweeps: pick one")
    if o["auto"] and (conc or rate) and (rate or "").lower() != "auto":
        raise click.BadParameter("--auto places the steps itself: drop --concurrency/--rate")
    if not (conc or rate or o["auto"]):
        raise click.BadParameter("give the steps (--concurrency 1,2,4,8 or --rate 1,2,5) or --auto")
    mode = "concurrency" if conc else "rate"
    steps = load_list(conc or rate, "--" + mode) if (conc or rate) else None
    base = _config({**o, "concurrency": 1, "rate": None, "request_id_prefix": None})
    return SweepConfig(
        base=base,
        mode=mode,
        steps=steps or [],
        auto=steps is None,
        auto_steps=o["auto_steps"],
        stop_error_rate=fraction(o["stop_error_rate"], "error rate"),
        slo_break_factor=o["slo_break"],
        keep_going=o["keep_going"],
        slo_percentile=o["slo_percentile"],
        peak_rps=o["peak_rps"],
        headroom=fraction(o["headroom"], "headroom"),
    )


def _run(
    config: SweepConfig, sweep_id: str, out: Path, console: Console, quiet: bool, store: Store | None
) -> SweepResult:
    writers: dict[int, RecordWriter] = {}
    files: dict[int, str] = {}
    progress: _Progress | None = None
    runner: Sweep | None = None

    def on_step_start(index: int, phase: str, mode: str, load: float, run: BenchRun) -> None:
        nonlocal progress
        path = step_records_path(out, index)
        writers[index] = RecordWriter(path)
        files[index] = path.name
        label = f"c={int(load)}" if mode == "concurrency" else f"{load:g} req/s"
        if not quiet:
            probe = " (probe)" if phase == "probe" else ""
            console.print(f"[bold]step {index}[/]{probe} {label} ...", highlight=False)
        progress = _Progress(console, quiet)
        progress.start(run.total_planned, config.base.duration_s)

    def on_record(index: int, record: RequestRecord) -> None:
        writers[index].write(record)
        if progress is not None:
            progress.advance(record)

    def on_step_done(step: SweepStep) -> None:
        if progress is not None:
            progress.stop()
        writers[step.index].close()
        console.print(_step_line(step), highlight=False)
        assert runner is not None
        write_result(out, runner.snapshot().to_dict(files))  # saved after every step
        if store is not None:  # each step is a full run in the store, labelled with its sweep
            try:
                save_result(store, step.result, kind="sweep")
            except StoreError as exc:
                console.print(
                    f"[red]could not store step {step.index} (run {step.result.run_id}): {exc}; "
                    f"it is in {out}[/]"
                )

    async def main() -> SweepResult:
        nonlocal runner
        runner = Sweep(config, sweep_id, on_step_start, on_record, on_step_done)
        loop = asyncio.get_running_loop()
        for sig, reason in ((signal.SIGINT, USER_STOP), (signal.SIGTERM, SIGTERM_STOP)):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, runner.stop, reason)

        async def tick() -> None:
            while True:
                if progress is not None and not quiet:
                    progress.progress.refresh()
                await asyncio.sleep(0.25)

        ticker = loop.create_task(tick())
        try:
            return await runner.run()
        finally:
            ticker.cancel()

    try:
        result = _event_loop_run(main())
    finally:
        for w in writers.values():
            w.close()
    doc = result.to_dict(files)
    write_result(out, doc)
    render_sweep(doc, console)
    console.print(f"sweep: {out}  (step records beside it: {out.stem}.stepNN.records.jsonl)")
    return result


def _step_line(step: SweepStep) -> str:
    s = step.result.summary
    label = f"c={int(step.load)}" if step.mode == "concurrency" else f"{step.load:g} req/s"
    phase = " (probe)" if step.phase == "probe" else ""
    line = (
        f"  step {step.index}{phase} {label}: {s.request_throughput:.2f} req/s, "
        f"TTFT P95 {fmt(s.ttft_ms.p95)} ms, TPOT P95 {fmt(s.tpot_ms.p95)} ms, "
        f"E2E P95 {fmt(s.e2e_ms.p95)} ms, errors {s.error_rate:.1%}"
    )
    if not step.result.valid:
        line += "  [client NOT VALID]"
    if step.result.interrupted:
        line += "  [interrupted]"
    return line


# the console shows the essentials; Markdown/CSV exports (tokenpace report) carry every column
_CONSOLE_COLUMNS = (
    "step",
    "load",
    "req/s",
    "TTFT p95",
    "TPOT p95",
    "E2E p95",
    "errors",
    "Little",
    "SLO",
    "note",
)


def render_sweep(doc: dict[str, Any], console: Console) -> None:
    headers, rows = steps_table(doc)
    keep = [i for i, h in enumerate(headers) if h in _CONSOLE_COLUMNS]
    title = f"tokenpace sweep {doc['sweep_id']} ({doc['mode']}{', auto' if doc['auto'] else ''})"
    table = Table(
        title=title,
        title_justify="left",
        box=box.SIMPLE_HEAD,
        padding=(0, 1),
        collapse_padding=True,
        pad_edge=False,
    )
    for i in keep:
        h = headers[i]
        table.add_column(h, justify="left" if h in ("load", "note", "Little") else "right", no_wrap=True)
    for row in rows:
        cells = []
        for i in keep:
            v = row[i]
            cells.append(f"{v:.1%}" if headers[i] == "errors" and v is not None else fmt(v))
        table.add_row(*cells, style="bold yellow" if "knee" in row[-1] else None)
    console.print(table)
    if doc.get("probe"):
        console.print(f"probe: {len(doc['probe'])} closed-loop steps found the maximum (in the JSON)")
    for line in plan_lines(doc):
        console.print(line, highlight=False, style="red" if line.startswith("Warning") else None)
    if doc.get("stop_reason") not in (None, "completed"):
        console.print(f"stopped: {doc['stop_reason']}", style="dim")


def _die(message: str) -> NoReturn:
    click.echo(f"tokenpace sweep: error: {message}", err=True)
    sys.exit(EXIT_BAD_INPUT)
