"""`tokenpace check --baseline NAME --max-regression ttft.p95=5%` and `--fail-on LINES`: the release
gate for CI, against a baseline and on absolute lines."""

from __future__ import annotations

import sys
from pathlib import Path

import click
from rich.console import Console

from tokenpace.app.baseline.check import CheckReport
from tokenpace.app.baseline.check import check as run_check
from tokenpace.app.baseline.terms import parse_thresholds
from tokenpace.app.jobs.fail_on_check import GatedCheck, judge_stored, stored_run
from tokenpace.app.jobs.until_decided import DEFAULT_MAX_RUNS
from tokenpace.app.run.terms import parse_fail_on
from tokenpace.cli.bench.gate_view import show_gate
from tokenpace.cli.fit import show_table
from tokenpace.cli.library.analysis_view import (
    COMPARISON_OPTIONAL,
    comparison_table,
    gate_table,
    noise_lines,
    print_rule,
    print_warnings,
)
from tokenpace.cli.library.check_until_view import BaselineGrowth, run_check_until
from tokenpace.cli.library.store_opts import (
    bootstrap_options,
    guarded,
    open_or_fail,
    store_option,
    write_report,
)


@click.command()
@click.option("--baseline", metavar="NAME", help="Baseline to check against.")
@click.option(
    "--max-regression",
    "max_regression",
    metavar="M.pNN=X%,...",
    help="Largest regression allowed per metric and percentile, e.g. ttft.p95=5%,e2e.p99=10%.",
)
@click.option(
    "--fail-on",
    "fail_on",
    metavar="LINES",
    help='Absolute gates on the run\'s own 95% intervals, e.g. "ttft.p95<500ms,error_rate<1%" (as '
    "bench --fail-on); with --max-regression too, any fail fails and any undecided is undecided.",
)
@click.option("--run", "run_ref", metavar="RUN", help="Run to check (default: the newest stored run).")
@click.option("--alpha", type=float, default=0.05, show_default=True, help="Significance level.")
@bootstrap_options  # --resamples, --seed
@click.option(
    "--out", type=click.Path(dir_okay=False, path_type=Path), help="Machine-readable report (JSON)."
)
@click.option("--quiet", "-q", is_flag=True, help="Only the outcome line.")
@click.option("--allow-invalid", is_flag=True, help="Judge a run that is NOT VALID or was interrupted.")
@click.option(
    "--allow-other-conditions",
    is_flag=True,
    help="Judge a run measured under other conditions than the baseline (load, lengths, API).",
)
@click.option(
    "--until-decided",
    is_flag=True,
    help="While the gate is undecided, run the candidate's test again (rebuilt from its stored "
    "conditions) and look again, on always-valid intervals, until it decides or --max-runs.",
)
@click.option(
    "--max-runs",
    type=int,
    default=DEFAULT_MAX_RUNS,
    show_default=True,
    help="With --until-decided: the most runs on the candidate side, the stored ones included.",
)
@click.option(
    "--baseline-url",
    metavar="URL",
    help="With --until-decided: the baseline's build is served at URL; where the baseline side limits "
    "the decision, its stored test is run there too (runs labelled baseline_rerun, never a candidate).",
)
@click.option(
    "--rerun-baseline",
    is_flag=True,
    help="With --until-decided: where the baseline side limits, measure the baseline again on the "
    "simulator profile it was measured on (a baseline from an external URL needs --baseline-url).",
)
@store_option
@guarded("check")
def check(
    baseline: str | None,
    max_regression: str | None,
    fail_on: str | None,
    run_ref: str | None,
    alpha: float,
    resamples: int,
    seed: int,
    out: Path | None,
    quiet: bool,
    allow_invalid: bool,
    allow_other_conditions: bool,
    until_decided: bool,
    max_runs: int,
    baseline_url: str | None,
    rerun_baseline: bool,
    store_url: str | None,
) -> None:
    """Exit 0 when every gated interval lies within its line, 1 when one lies wholly beyond it
    (regressed, or a --fail-on line missed), 5 when one is undecided (its interval holds the line,
    or too few samples), 2 on bad input (a run that is NOT VALID or was interrupted, unless
    --allow-invalid; a run measured under other conditions, unless --allow-other-conditions).
    With --until-decided, the same codes once the runs are spent or the gate decided."""
    if not max_regression and not fail_on:
        raise ValueError("give --max-regression (against --baseline) and/or --fail-on LINES")
    if max_regression and not baseline:
        raise ValueError("--max-regression needs --baseline NAME (the run it is judged against)")
    lines = parse_fail_on(fail_on) if fail_on else ()
    thresholds = parse_thresholds(max_regression) if max_regression else []
    if not 0 < alpha < 1:
        raise ValueError("--alpha must be between 0 and 1")
    if until_decided:
        if allow_invalid or allow_other_conditions or out or lines or not (baseline and max_regression):
            raise ValueError(
                "--until-decided judges valid runs of the baseline's test against --baseline and "
                "--max-regression, without --out or --fail-on"
            )
        grow = BaselineGrowth(baseline_url, rerun_baseline, max_regression or "")
        run_check_until(store_url, baseline, thresholds, run_ref, max_runs, alpha, quiet, grow)
        return
    if baseline_url or rerun_baseline:
        raise ValueError("--baseline-url and --rerun-baseline work only with --until-decided")
    store = open_or_fail("check", store_url)
    report = None
    if thresholds and baseline:
        report = run_check(
            store, baseline, thresholds, run_ref, alpha, resamples, seed, allow_invalid,
            allow_other_conditions,
        )  # fmt: skip
    run = report.run.b if report is not None else stored_run(store, run_ref, baseline)
    gated = GatedCheck(run.id, judge_stored(run, lines, allow_invalid) if lines else None, report)
    if out:
        write_report(out, gated.to_dict())
    console = Console()
    if report is not None:
        _show_check(console, report, baseline or "", quiet)
    if gated.gate is not None:
        if not quiet:
            show_gate(console, gated.gate, decided=False)
        console.print(f"fail-on {gated.gate.line()} (run {run.id})", highlight=False)
    sys.exit(int(gated.exit_code))


def _show_check(console: Console, report: CheckReport, baseline: str, quiet: bool) -> None:
    if not quiet:
        title = f"baseline {baseline} = A ({report.run.a.id})  vs  B = {report.run.b.id}"
        show_table(console, comparison_table(report.run.comparison, title), optional=COMPARISON_OPTIONAL)
        show_table(console, gate_table(report.items), optional=("allowed",))
        for line in noise_lines(report.run.comparison, [t.name for t in report.thresholds]):
            console.print(line, highlight=False)
        print_warnings(console, report.run.warnings)
        print_rule(console, report.run.comparison.rule)
    failed = [i.threshold.name for i in report.items if i.outcome == "regressed"]
    undecided = [i.threshold.name for i in report.items if i.outcome == "undecided"]
    if failed:
        line = f"REGRESSED: {', '.join(failed)} (run {report.run.b.id} vs baseline {baseline})"
    elif undecided:
        line = f"UNDECIDED: {', '.join(undecided)} (see why; run {report.run.b.id} vs baseline {baseline})"
    else:
        line = f"PASS: no regression beyond the thresholds (run {report.run.b.id} vs baseline {baseline})"
    console.print(line, highlight=False)
