"""`tokenpace compare A B`: two stored runs, metric by metric, with a verdict."""

from __future__ import annotations

from pathlib import Path

import click
import orjson
from rich.console import Console

from tokenpace.app.baseline.compare import compare_runs
from tokenpace.app.rollout.shadow_compare import paired_if_shadow
from tokenpace.cli.fit import show_table
from tokenpace.cli.library.analysis_view import (
    COMPARISON_OPTIONAL,
    comparison_table,
    noise_lines,
    print_rule,
    print_warnings,
    run_level_table,
    undecided_line,
)
from tokenpace.cli.library.paired_view import PAIRED_NOTE, paired_table
from tokenpace.cli.library.store_opts import (
    guarded,
    open_or_fail,
    parse_percent,
    parse_percentiles,
    store_option,
    write_report,
)


@click.command()
@click.argument("run_a")
@click.argument("run_b")
@click.option("--alpha", type=float, default=0.05, show_default=True, help="Significance level.")
@click.option(
    "--min-effect",
    default="5%",
    show_default=True,
    help="Practical threshold: slower/faster only when the whole interval lies beyond it, "
    "'negligible' when within it (reruns of an unchanged server move a percentile by 2-10%).",
)
@click.option(
    "--percentiles", default="50,95,99", show_default=True, help="Percentiles compared, comma-separated."
)
@click.option("--resamples", type=int, default=1000, show_default=True, help="Bootstrap resamples.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the bootstrap.")
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), help="Also write the JSON here.")
@click.option("--allow-invalid", is_flag=True, help="Compare runs that are NOT VALID or were interrupted.")
@click.option(
    "--single", is_flag=True, help="Compare only the runs named, not the repeat groups they belong to."
)
@store_option
@guarded("compare")
def compare(
    run_a: str,
    run_b: str,
    alpha: float,
    min_effect: str,
    percentiles: str,
    resamples: int,
    seed: int,
    as_json: bool,
    out: Path | None,
    allow_invalid: bool,
    single: bool,
    store_url: str | None,
) -> None:
    """Compare run B with run A (run ids, baseline names, or KEY=VALUE labels: the newest match).

    For TTFT, TPOT, ITL, E2E and per-request throughput: the percentiles of each side, B - A with a
    confidence interval that counts the noise between requests and between runs, the smallest
    detectable change, a Mann-Whitney rank test, and a verdict. A run of a repeat group (bench
    --repeat) stands for its group.
    """
    if not 0 < alpha < 1:
        raise ValueError("--alpha must be between 0 and 1")
    if resamples < 100:
        raise ValueError("--resamples must be at least 100")
    store = open_or_fail("compare", store_url)
    rc = compare_runs(
        store,
        run_a,
        run_b,
        parse_percentiles(percentiles),
        alpha,
        parse_percent(min_effect, "--min-effect"),
        resamples,
        seed,
        allow_invalid,
        single,
    )
    data = rc.to_dict()
    paired = paired_if_shadow(store, rc.a, rc.b, max(parse_percent(min_effect, "--min-effect"), 0.02))
    if paired is not None:
        data["paired"] = paired.to_dict()
    if out:
        write_report(out, data)
    if as_json:
        click.echo(orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY))
        return
    console = Console()
    title = f"A = {rc.a.id} {_labels(rc.a.labels)}  vs  B = {rc.b.id} {_labels(rc.b.labels)}"
    show_table(console, comparison_table(rc.comparison, title), optional=COMPARISON_OPTIONAL)
    show_table(console, run_level_table(rc.run_level))
    if paired is not None:
        show_table(console, paired_table(paired))
        console.print(PAIRED_NOTE)
    for line in noise_lines(rc.comparison):
        console.print(line, highlight=False)
    if (undecided := undecided_line(rc.comparison)) is not None:
        console.print(undecided, highlight=False)
    print_warnings(console, rc.warnings)
    print_rule(console, rc.comparison.rule)


def _labels(labels: dict[str, str]) -> str:
    return "(" + ",".join(f"{k}={v}" for k, v in sorted(labels.items())) + ")" if labels else ""
