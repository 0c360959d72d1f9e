"""`tokenpace history --metric ttft.p95 --where model=...`: a metric over time, with level shifts."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click
import orjson
from rich.console import Console
from rich.table import Table

from tokenpace.app.baseline.history import history as run_history
from tokenpace.app.baseline.history import history_noise
from tokenpace.app.baseline.store_ops import parse_where
from tokenpace.cli.fit import show_table
from tokenpace.cli.library.store_opts import (
    guarded,
    open_or_fail,
    parse_percent,
    parse_when,
    store_option,
    write_report,
)

if TYPE_CHECKING:
    from tokenpace.app.baseline.terms import History, RunNoise


@click.command()
@click.option("--metric", required=True, help="ttft.p95, e2e.p99, tpot.p50, itl.mean, throughput, ...")
@click.option("--where", "where", multiple=True, metavar="K=V", help="Label, model, endpoint or condition.")
@click.argument("filters", nargs=-1, metavar="[K=V]...")
@click.option("--since", help="Runs started since: 90d, 2024-01-01 ...")
@click.option("--until", help="Runs started until.")
@click.option("--limit", type=int, help="Only the newest N matching runs.")
@click.option("--alpha", type=float, default=0.05, show_default=True, help="False-alarm rate per series.")
@click.option(
    "--permutations",
    type=int,
    default=199,
    show_default=True,
    help="Permutations of the significance test of each level shift.",
)
@click.option("--min-size", type=int, default=5, show_default=True, help="Fewest runs in a segment.")
@click.option(
    "--min-shift",
    default="5%",
    show_default=True,
    help="Smallest level change called a shift: the interval of its size must lie beyond it.",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the permutation test.")
@click.option("--json", "as_json", is_flag=True, help="The runs and level shifts as JSON instead of a table.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), help="Also write the JSON here.")
@store_option
@guarded("history")
def history(
    metric: str,
    where: tuple[str, ...],
    filters: tuple[str, ...],
    since: str | None,
    until: str | None,
    limit: int | None,
    alpha: float,
    permutations: int,
    min_size: int,
    min_shift: str,
    seed: int,
    as_json: bool,
    out: Path | None,
    store_url: str | None,
) -> None:
    """The metric of every matching run, oldest first, and the level shifts E-divisive finds in it."""
    if not 0 < alpha < 1:
        raise ValueError("--alpha must be between 0 and 1")
    if permutations < 19:
        raise ValueError("--permutations must be at least 19")
    if min_size < 2:
        raise ValueError("--min-size must be at least 2")
    store = open_or_fail("history", store_url)
    hist, varying = run_history(
        store,
        metric,
        parse_where(list(where) + list(filters)),
        parse_when(since),
        parse_when(until),
        limit,
        alpha,
        permutations,
        min_size,
        seed,
        parse_percent(min_shift, "--min-shift"),
    )
    noise = history_noise(store, hist)
    data = hist.to_dict() | {"varying_conditions": varying, "run_noise": noise.to_dict() if noise else None}
    if out:
        write_report(out, data)
    if as_json:
        click.echo(orjson.dumps(data, option=orjson.OPT_INDENT_2))
        return
    console = Console()
    shifts = {cp.index: cp for cp in hist.change_points}
    table = Table(
        title=f"{hist.metric} over {len(hist.points)} runs", title_justify="left", header_style="bold"
    )
    for col in ("#", "run", "started (UTC)", hist.metric, "level shift"):
        table.add_column(col, justify="right" if col in ("#", hist.metric) else "left")
    for i, p in enumerate(hist.points):
        cp = shifts.get(i)
        mark = ""
        if cp is not None:
            change = f"{cp.rel_change:+.1%}" if cp.rel_change is not None else "?"
            mark = f"[bold]<- shift {change}[/] ({cp.before:,.2f} -> {cp.after:,.2f}, p={cp.p_value:.3f})"
        table.add_row(str(i), p.run_id, p.started_at[:19].replace("T", " "), f"{p.value:,.2f}", mark)
    show_table(console, table)
    if not hist.points:
        console.print("no matching run has this metric", highlight=False)
    elif len(hist.points) < 2 * min_size:
        console.print(
            f"too few runs to look for a level shift ({len(hist.points)}; needs {2 * min_size}, "
            f"twice --min-size)",
            highlight=False,
        )
    elif not hist.change_points:
        console.print(f"no level shift found ({len(hist.points)} runs)", highlight=False)
    for line in _noise_lines(hist, noise):
        console.print(line, highlight=False)
    if varying:
        shown = ", ".join(varying[:10]) + (" ..." if len(varying) > 10 else "")
        console.print(f"[yellow]warning:[/] conditions vary across these runs: {shown}", highlight=False)
    if hist.skipped:
        console.print(f"{len(hist.skipped)} matching run(s) have no {hist.metric}", highlight=False)
    console.print(f"[dim]Method: {hist.method}[/]", highlight=False)


def _noise_lines(hist: History, noise: RunNoise | None) -> list[str]:
    """Minor level changes (found, but not shown beyond --min-shift) and the learned run noise."""
    out = []
    for cp in hist.minor:
        size = hist.sizes.get(cp.index)
        how = f"{size.rel:+.1%} [{size.lo:+.1%}, {size.hi:+.1%}]" if size else "size unknown"
        out.append(
            f"minor level change at run {cp.index} ({how}): not shown beyond +-{hist.min_shift:.0%}, "
            "so not called a shift"
        )
    if noise is not None:
        out.append(f"run noise {hist.metric} under these conditions: {noise.describe()}")
    if hist.detectable is not None:
        out.append(
            f"smallest shift this history would call 9 times in 10: {hist.detectable:+.1%} "
            "(at best, halfway through; the runs' spread is the noise between runs)"
        )
    return out
