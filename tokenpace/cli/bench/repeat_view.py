"""What ``bench --repeat K`` learned about the noise between runs: one table (display only), and
the one line per run that ``--quiet`` shows instead of each run's dashboard."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from tokenpace.app.jobs.bench_job import BenchOutcome
from tokenpace.app.jobs.repeat_job import RepeatOutcome
from tokenpace.cli.fit import show_table


def _p95(summary: dict[str, Any], metric: str) -> str:
    value = (summary.get(metric) or {}).get("p95")
    return "-" if value is None else f"{value:,.1f} ms"


def run_line(title: str, outcome: BenchOutcome) -> str:
    """One run in a line: its id, requests ok, P95 TTFT and E2E, whether it is valid, its file."""
    result = outcome.result
    summary = result.summary.to_dict()
    counts = summary.get("counts") or {}
    reasons = result.invalid_reasons
    validity = f"NOT VALID ({reasons[0]})" if reasons else "valid"
    where = f" -> {outcome.out}" if outcome.out else ""
    return (
        f"{title}: run {result.run_id}, {counts.get('ok', 0)} ok of {counts.get('sent', 0)}, "
        f"TTFT P95 {_p95(summary, 'ttft_ms')}, E2E P95 {_p95(summary, 'e2e_ms')}, {validity}{where}"
    )


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
