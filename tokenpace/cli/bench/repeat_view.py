"""What ``bench --repeat K`` learned about the noise between runs: one table (display only)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from tokenpace.app.jobs.repeat_job import RepeatOutcome
from tokenpace.cli.fit import show_table


def show_repeat_noise(console: Console, group: RepeatOutcome) -> None:
    runs = group.runs_used
    if group.noise:
        t = Table(
            title=f"Noise between {runs} runs of one test (repeat group {group.group_id})",
            title_justify="left",
            header_style="bold",
        )
        for name in ("metric", "mean", "between runs (SD)", "within a run (SE)"):
            t.add_column(name, justify="left" if name == "metric" else "right")
        for g in group.noise:
            t.add_row(g.key, f"{g.level:,.2f}", f"{g.rel_var**0.5:.1%}", f"{g.within_se:.1%}")
        t.caption = (
            "between runs: the SD of a percentile across reruns beyond its sampling noise; "
            "compare and check count it in every interval"
        )
        show_table(console, t)
    if group.stored:
        console.print(
            f"stored as repeat group {group.group_id} ({runs} runs, label repeat={group.group_id}) "
            f"in {group.stored}",
            highlight=False,
        )
    if group.note:
        console.print(f"[yellow]note:[/] {group.note}", highlight=False)
