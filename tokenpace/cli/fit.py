"""Tables that fit any terminal without cutting a run id or a number.

Rich shortens a cell that does not fit to "8903f…" or "271.…": a run id that can no longer be pasted
into `compare`, a number that is no longer a number. Here, under a pipe (CI logs, `| less`, a file)
a table is plain ASCII at its natural width; in a narrow terminal the optional columns are left out
(and a line names them), and what still does not fit folds onto the next line instead of being cut.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich import box
from rich.console import Console
from rich.table import Table

_UNBOUNDED = 100_000


def natural_width(console: Console, table: Table) -> int:
    """The width the table takes when nothing limits it."""
    return console.measure(table, options=console.options.update_width(_UNBOUNDED)).maximum


def whole(table: Table) -> Table:
    """The table with every cell folding instead of being cut: for a table drawn inside a panel,
    whose width ``show_table`` does not choose."""
    for column in table.columns:
        column.no_wrap = False
        column.overflow = "fold"
    return table


def show_table(console: Console, table: Table, optional: Sequence[str] = ()) -> None:
    """Print ``table`` whole; ``optional`` names the columns a narrow terminal may leave out,
    the first named first."""
    if not console.is_terminal:
        table.box = box.ASCII
        width = console.width
        console.width = max(width, natural_width(console, table))
        try:
            console.print(table)
        finally:
            console.width = width
        return
    dropped = []
    for name in optional:
        if natural_width(console, table) <= console.width:
            break
        index = next((i for i, c in enumerate(table.columns) if c.header == name), None)
        if index is not None:
            table.columns.pop(index)
            dropped.append(name)
    console.print(whole(table))
    if dropped:
        left_out = ", ".join(repr(name) for name in dropped)
        console.print(f"(columns {left_out} left out to fit {console.width} columns)", highlight=False)
