"""`tokenpace sweep`: a ladder of bench runs (concurrency or rate steps), the knee and the plan."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, NoReturn

import click
from rich import box
from rich.console import Console
from rich.table import Table

from tokenpace.app.jobs.bench_job import REFUSALS
from tokenpace.app.jobs.sweep_job import run_sweep_job
from tokenpace.app.reports.tables import fmt, interval, plan_lines, steps_table
from tokenpace.app.run.outputs import ExitStatus, RunOutputs
from tokenpace.app.run.terms import EndpointError
from tokenpace.app.sweep.sweep import SweepConfig
from tokenpace.cli.bench.bench_cmd import VllmArgs, bench
from tokenpace.cli.bench.bench_options import bench_config, stdout_out
from tokenpace.cli.bench.gate_view import show_step_gates
from tokenpace.cli.bench.run_view import SweepView
from tokenpace.cli.fit import show_table
from tokenpace.cli.vllm import vllm_opts

EXIT_BAD_INPUT = int(ExitStatus.REFUSED)
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


@click.command(cls=VllmArgs)
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
@click.option(
    "--revisit/--no-revisit",
    default=True,
    show_default=True,
    help="Run the first step again after the last (3 steps or more): latency that moved with time "
    "is drift, and then no knee or replica count is read from the sweep.",
)
@click.option("--peak-rps", type=float, help="Peak traffic to plan replicas for.")
@click.option("--headroom", default="30%", show_default=True, help="Headroom under the ceiling per replica.")
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Sweep JSON (steps in the bench --out format, knee, plan); step records beside it "
    "(default results/sweep-TIME-ID.json). -: the sweep JSON on standard output.",
)
@click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
def sweep(**opts: Any) -> None:
    """Sweep the load: one full bench run per step, then the knee, max goodput and the capacity plan."""
    to_stdout = stdout_out(opts)  # --out - : the sweep JSON on stdout, everything else on stderr
    try:
        config = _sweep_config(opts)
    except (click.BadParameter, ValueError, EndpointError) as exc:
        _die(str(exc))
    console = Console(stderr=to_stdout)
    outputs = RunOutputs(out=opts["out"], store_url=opts["store_url"], save=not opts["no_store"])
    planned = len(config.steps) if config.steps and not config.auto else None
    view = SweepView(console, opts["quiet"], planned)
    try:
        outcome = run_sweep_job(config, outputs, opts["sim_profile"], view)
    except (ValueError, *REFUSALS) as exc:  # a bad config is refused by the job, before any load
        _die(str(exc))
    render_sweep(outcome.doc, console)
    out = outcome.out
    assert out is not None
    console.print(f"sweep: {out}  (step records beside it: {out.stem}.stepNN.records.jsonl)")
    steps = [(f"step {s.index} ({_load(s.mode, s.load)})", s.result.fail_on) for s in outcome.result.curve()]
    show_step_gates(console, steps)
    if to_stdout:
        sys.stdout.buffer.write(out.read_bytes().rstrip(b"\n") + b"\n")
        sys.stdout.flush()
    decision = outcome.exit_decision
    if decision.code is not ExitStatus.OK:
        click.echo(f"tokenpace sweep: {decision.reason} (exit {int(decision.code)})", err=True)
        sys.exit(int(decision.code))


# the bench options (target, workload, bounds per step, SLO, ...) come first in --help
sweep.params = [p for p in bench.params if p.name not in _NOT_SHARED] + sweep.params


def _sweep_config(o: dict[str, Any]) -> SweepConfig:
    vllm_opts.apply_for_sweep(o)  # vLLM's dataset, target and sampling flags mean the same per step
    conc, rate = o["concurrency_steps"], o["rate_steps"]
    if conc and rate:
        raise click.BadParameter("--concurrency and --rate are two sweeps: pick one")
    if o["auto"] and (conc or rate) and (rate or "").lower() != "auto":
        raise click.BadParameter("--auto places the steps itself: drop --concurrency/--rate")
    if not (conc or rate or o["auto"]):
        lengths = _input_len_steps(o["input_len"])
        if lengths:  # an input-length sweep, at concurrency 1: prefill alone, nothing queued
            base = bench_config({**o, "input_len": str(lengths[0]), "concurrency": 1, "rate": None,
                                 "request_id_prefix": None})  # fmt: skip
            return SweepConfig(base=base, mode="input_len", steps=[float(n) for n in lengths])
        raise click.BadParameter(
            "give the steps (--concurrency 1,2,4,8 or --rate 1,2,5), --auto, or input lengths "
            "(--input-len 512,1024,2048)"
        )
    mode = "concurrency" if conc else "rate"
    steps = load_list(conc or rate, "--" + mode) if (conc or rate) else None
    base = bench_config({**o, "concurrency": 1, "rate": None, "request_id_prefix": None})
    return SweepConfig(
        base=base,
        mode=mode,
        steps=steps or [],
        auto=steps is None,
        auto_steps=o["auto_steps"],
        stop_error_rate=fraction(o["stop_error_rate"], "error rate"),
        slo_break_factor=o["slo_break"],
        keep_going=o["keep_going"],
        revisit=o["revisit"],
        slo_percentile=o["slo_percentile"],
        peak_rps=o["peak_rps"],
        headroom=fraction(o["headroom"], "headroom"),
    )


def _input_len_steps(text: str | None) -> list[int] | None:
    """``--input-len 512,1024,2048`` with no load steps: the lengths of an input-length sweep."""
    parts = [p.strip() for p in (text or "").split(",")]
    if len(parts) < 2 or not all(p.isdigit() and int(p) > 0 for p in parts):
        return None
    return [int(p) for p in parts]


def _tokens(mean: float | None) -> str:
    """A mean token count as the whole number people read beside others (1,035, not 267.0)."""
    return "-" if mean is None else f"{mean:,.0f}"


def render_prefill_fit(doc: dict[str, Any], console: Console) -> None:
    """An input-length sweep: TTFT per length, and the fit of TTFT on input tokens."""
    for step in doc["steps"]:
        s = step["summary"]
        ttft = s["ttft_ms"]
        cis = ttft.get("ci95") or {}
        console.print(
            f"  input {_tokens((s.get('prompt_tokens') or {}).get('mean'))} tokens: "
            f"TTFT P50 {fmt(ttft.get('p50'))} {interval(cis.get('p50'))} ms, "
            f"P95 {fmt(ttft.get('p95'))} {interval(cis.get('p95'))} ms",
            highlight=False,
        )
    fit = doc.get("prefill_fit")
    if fit is None:
        console.print(f"no prefill fit: {doc.get('prefill_fit_reason', 'no steps')}")
        return
    lo, hi = fit["ms_per_1k_tokens_ci95"]
    flo, fhi = fit["fixed_ms_ci95"]
    console.print(
        f"Prefill: {fit['ms_per_1k_tokens']:.3g} ms per 1k input tokens (95% CI {lo:.3g} to {hi:.3g}); "
        f"fixed part {fit['fixed_ms']:.3g} ms ({flo:.3g} to {fhi:.3g}); {fit['n']} requests, "
        f"R² {fit['r2']:.3f}"
    )


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
    "GPU util %",
    "GPU W",
    "waiting",
    "note",
)


def render_sweep(doc: dict[str, Any], console: Console) -> None:
    if doc.get("mode") == "input_len":
        console.print(f"tokenpace sweep {doc['sweep_id']} (input length, concurrency 1)")
        render_prefill_fit(doc, console)
        return
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
    show_table(console, table, optional=("note", "Little", "GPU W"))
    if doc.get("probe"):
        console.print(f"probe: {len(doc['probe'])} closed-loop steps found the maximum (in the JSON)")
    for line in plan_lines(doc):
        console.print(line, highlight=False, style="red" if line.startswith("Warning") else None)
    if doc.get("stop_reason") not in (None, "completed"):
        console.print(f"stopped: {doc['stop_reason']}", style="dim")


def _die(message: str) -> NoReturn:
    click.echo(f"tokenpace sweep: error: {message}", err=True)
    sys.exit(EXIT_BAD_INPUT)


def _load(mode: str, load: float) -> str:
    return f"c={load:g}" if mode == "concurrency" else f"{load:g}/s" if mode == "rate" else f"{mode} {load:g}"
