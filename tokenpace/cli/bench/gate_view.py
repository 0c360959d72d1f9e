"""The --fail-on lines as the console shows them: each line's verdict with its interval, then the one
line that decided (bench), or each step's deciding line (sweep)."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console

from tokenpace.app.run.terms import FailOnReport

_STYLE = {"pass": "green", "fail": "bold red", "undecided": "yellow"}


def show_gate(console: Console, report: FailOnReport | None, decided: bool = True) -> None:
    """Each line's verdict; then (``decided``) the one that decided the run."""
    if report is None:
        return
    for item in report.items:
        style = _STYLE[item.outcome]
        console.print(
            f"fail-on {item.line.text}: [{style}]{item.outcome}[/{style}] {item.reason}", highlight=False
        )
    if decided:
        console.print(f"fail-on {report.line()}", style=_STYLE[report.outcome], highlight=False)


def show_step_gates(console: Console, steps: Sequence[tuple[str, FailOnReport | None]]) -> None:
    """One line a step: the step (its number and load) and the line that decided it."""
    for where, report in steps:
        if report is not None:
            console.print(f"fail-on {where}: {report.line()}", style=_STYLE[report.outcome], highlight=False)
