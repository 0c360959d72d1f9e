"""The one way tokenpace reads a file back: within a stated bound, checked before anything is kept.

A file named on the command line or left by an earlier run (a simulator profile, a fault file, a
result, its records, spans, scenario files, the scraper's output, key files, workload files) may be
huge, endless (``/dev/zero``, a FIFO) or not text. Each read here takes at most its bound plus one
byte, and past it stops with ``FileBoundError``: one line naming the file, the line where there is
one, and the bound, never a traceback or a gigabyte in memory. The bounds themselves live beside
their readers and are listed in docs (docs/gateway-reference.md "Bounds", docs/workloads-reference.md,
docs/sim-reference.md).
OSError (no such file, a folder, no permission) is left to the caller, which words it for its flag.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path


class FileBoundError(ValueError):
    """A file past its bound, or not the text it should be; ``str()`` is one line for the user."""

    def __init__(self, path: Path | str, line: int | None, reason: str) -> None:
        self.path, self.line, self.reason = str(path), line, reason
        super().__init__(f"{path}" + (f", line {line}" if line else "") + f": {reason}")


def size_text(n: int) -> str:
    if n >= 1024 * 1024:
        return f"{n / (1024 * 1024):g} MiB"
    return f"{n / 1024:g} KiB" if n >= 1024 else f"{n} bytes"


def read_bytes(path: Path | str, limit: int, what: str) -> bytes:
    """The whole file, when it holds at most ``limit`` bytes (``what`` names it in the error)."""
    with Path(path).open("rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise FileBoundError(path, None, f"over {size_text(limit)}: not read (the bound of {what})")
    return data


def read_text(path: Path | str, limit: int, what: str) -> str:
    """The whole file as UTF-8 text (a leading BOM dropped), when it holds at most ``limit`` bytes."""
    data = read_bytes(path, limit, what)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise FileBoundError(path, None, f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def read_lines(
    path: Path | str, line_limit: int, what: str, max_lines: int | None = None
) -> Iterator[tuple[int, bytes]]:
    """(number, bytes) of each line, each read at most ``line_limit`` bytes at a time (a longer one
    is refused, never read whole), at most ``max_lines`` of them."""
    with Path(path).open("rb") as f:
        n = 0
        while raw := f.readline(line_limit + 1):
            n += 1
            if len(raw) > line_limit and not raw.endswith(b"\n"):
                raise FileBoundError(
                    path, n, f"line over {size_text(line_limit)}: not read (the bound of {what})"
                )
            if max_lines is not None and n > max_lines:
                raise FileBoundError(
                    path, n, f"more than {max_lines:,} lines: not read (the bound of {what})"
                )
            yield n, raw
