"""``check --until-decided``: the call and what it shows (the stored candidate judged first; its test
run again only while the always-valid gate is undecided)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rich.console import Console

from tokenpace.app.baseline.terms import Threshold
from tokenpace.app.jobs.bench_job import REFUSALS, BenchOutcome
from tokenpace.app.jobs.check_until import check_until_decided, what_would_decide
from tokenpace.cli.bench.dashboard import render
from tokenpace.cli.bench.run_view import BenchProgress, print_saved


@dataclass(frozen=True, slots=True)
class BaselineGrowth:
    """How the baseline side may grow: ``--baseline-url``, ``--rerun-baseline``; and the gate as
    typed (to say the exact command that would grow it)."""

    url: str | None
    rerun: bool
    gate: str


def _again(store_url: str | None, baseline: str, grow: BaselineGrowth, max_runs: int, run: str) -> str:
    """The exact command that checks again, measuring the baseline where its build is served."""
    store = f" --store {store_url}" if store_url else ""
    return (
        f"tokenpace check --baseline {baseline} --max-regression {grow.gate} --until-decided "
        f"--max-runs {max_runs} --run {run} --baseline-url URL{store}"
    )


def run_check_until(
    store_url: str | None,
    baseline: str,
    thresholds: Sequence[Threshold],
    run_ref: str | None,
    max_runs: int,
    alpha: float,
    quiet: bool,
    grow: BaselineGrowth,
) -> None:
    """Exit 0 pass, 1 regressed, 5 undecided (with what would decide it), 2 bad input."""
    console = Console()

    def shown(side: str) -> Callable[[int, BenchOutcome], None]:
        def show(k: int, outcome: BenchOutcome) -> None:
            console.rule(f"{side} run {k + 1} added (the {side} side at most {max_runs} runs)")
            if not quiet:
                render(outcome.result.to_dict(), console)
            print_saved(console, outcome.saved, "bench", outcome.out)

        return show

    try:
        got = check_until_decided(
            store_url, baseline, thresholds, run_ref, max_runs, alpha, BenchProgress(console, quiet),
            shown("candidate"), grow.url, grow.rerun, shown("baseline"),
        )  # fmt: skip
    except REFUSALS as exc:  # the test could not be run again (endpoint gone, simulator failed)
        raise ValueError(str(exc)) from None
    done = got.done
    for item in done.items:
        console.print(f"{item.threshold.name}: {item.outcome}: {item.reason()}", highlight=False)
    for note in done.notes:
        console.print(f"note: {note}", style="yellow", highlight=False)
    for line in what_would_decide(done, len(done.baseline_runs)):
        console.print(f"to decide: {line}", highlight=False)
    if done.baseline_limits and done.baseline_rerun is None:
        again = _again(store_url, baseline, grow, max_runs, got.candidate)
        console.print(f"to decide, with the baseline's build served at URL: {again}", highlight=False)
    grown = f" and {done.baseline_added} measured again {done.baseline_rerun}" if done.baseline_rerun else ""
    sides = (
        f"{got.stored_runs} stored candidate run(s) ({got.candidate}) and {got.runs_added} added, "
        f"against baseline {baseline} ({len(done.baseline_runs)} stored run(s){grown})"
    )
    console.print(
        f"{done.outcome.upper()} after {sides}; always-valid intervals: stopping at the first decision "
        f"keeps the false-alarm rate at {alpha:.0%}",
        highlight=False,
    )
    sys.exit(done.exit_code)
