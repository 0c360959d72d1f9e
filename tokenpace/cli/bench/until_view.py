"""``bench --repeat auto --baseline NAME --max-regression ...``: its options, the call and what it
shows (repeats only while the gate is undecided)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import click
from rich.console import Console

from tokenpace.app.baseline.store_ops import StoreError
from tokenpace.app.baseline.terms import parse_thresholds
from tokenpace.app.jobs.bench_job import REFUSALS, BenchOutcome
from tokenpace.app.jobs.until_decided import DEFAULT_MAX_RUNS, run_until_decided
from tokenpace.app.run.bench_config import BenchConfig
from tokenpace.app.run.outputs import RunOutputs
from tokenpace.cli.bench.dashboard import render
from tokenpace.cli.bench.repeat_view import run_line
from tokenpace.cli.bench.run_view import BenchProgress, print_saved

until_options = [
    click.option(
        "--baseline",
        "gate_baseline",
        metavar="NAME",
        help="With --repeat auto: the baseline the runs are gated against.",
    ),
    click.option(
        "--max-regression",
        "gate_max_regression",
        metavar="M.pNN=X%,...",
        help="With --repeat auto: the gate's thresholds, as check's (e.g. ttft.p50=5%).",
    ),
    click.option(
        "--max-runs",
        type=int,
        default=DEFAULT_MAX_RUNS,
        show_default=True,
        help="With --repeat auto: the most runs before the gate is left undecided.",
    ),
]


def with_until_options(f: Any) -> Any:
    for option in reversed(until_options):
        f = option(f)
    return f


Die = Callable[[str], Any]


def run_auto(config: BenchConfig, outputs: RunOutputs, opts: dict[str, Any], con: Console, die: Die) -> None:
    """Run until the gate decides; exit 0 pass, 1 regressed, 5 undecided, 2 bad input."""
    if not opts.get("gate_baseline") or not opts.get("gate_max_regression"):
        die("--repeat auto repeats until the gate decides: give --baseline NAME and --max-regression")
    try:
        thresholds = parse_thresholds(opts["gate_max_regression"])
    except ValueError as exc:
        die(f"--max-regression: {exc}")

    def shown(k: int, outcome: BenchOutcome) -> None:
        if opts["quiet"]:
            con.print(run_line(f"run {k + 1} (at most {opts['max_runs']})", outcome), highlight=False)
            if outcome.saved is not None and not outcome.saved.ok:  # a store error is never hidden
                print_saved(con, outcome.saved, "bench", outcome.out)
            return
        con.rule(f"run {k + 1} (at most {opts['max_runs']})")
        render(outcome.result.to_dict(), con)
        print_saved(con, outcome.saved, "bench", outcome.out)

    try:
        done = run_until_decided(
            config, opts["gate_baseline"], thresholds, opts["max_runs"], outputs, opts["sim_profile"],
            BenchProgress(con, opts["quiet"]), shown,
        )  # fmt: skip
    except (*REFUSALS, ValueError, StoreError) as exc:
        die(str(exc))
    for item in done.items:
        con.print(f"{item.threshold.name}: {item.outcome}: {item.reason()}", highlight=False)
    for note in done.notes:
        con.print(f"note: {note}", style="yellow", highlight=False)
    runs = len(done.group.outcomes) if done.group else 0
    con.print(
        f"{done.outcome.upper()} after {runs} run(s) against baseline {done.baseline} "
        f"({len(done.baseline_runs)} run(s)); always-valid intervals: stopping at the first decision "
        "keeps the false-alarm rate at 5 %",
        highlight=False,
    )
    sys.exit(done.exit_code)
