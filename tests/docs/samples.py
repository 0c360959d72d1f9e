"""The sample outputs shown in README.md and docs/*.md, and the shape a real run must share with them.

A sample is the ```text block right after a `<!-- sample: NAME -->` line. SAMPLES says where each
one comes from: a command run as written against the built-in simulator (README's), or a block of
the playbook's walkthrough (tests/docs/test_playbook.py runs it and compares). What is compared is
the *shape*, never a number: every figure, run id and port is masked, so a sample goes stale only
when the tool prints other rows or labels (a ci95 row added, a section renamed).
scripts/doc_samples.py rewrites the blocks from real runs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MARKER = re.compile(r"^<!-- sample: ([a-z0-9-]+) -->\n```text\n(.*?)^```", re.S | re.M)
COLUMNS = "100"  # the width the samples are printed at


@dataclass(frozen=True, slots=True)
class Sample:
    doc: str  # relative to the repository's root
    kind: str  # "dashboard" (bench's panel), "help" (a --help: its flags) or "lines" (`...` skips lines)
    command: str = ""  # run as written (a shell line), in an empty folder with a throwaway store
    playbook_block: str = ""  # else: the playbook's ```sh block holding this text


# Every command's --help, in docs/cli-reference.md: the flags a run of `--help` lists must be the ones
# the page shows (a flag added or renamed makes the page stale).
COMMANDS: tuple[str, ...] = (
    "bench", "sweep", "plan", "report", "runs list", "runs show", "runs label", "runs delete",
    "runs export", "runs import", "compare", "check", "history", "baseline set", "baseline unset",
    "baseline list", "ab", "arms", "gateway", "sim", "scenarios", "select", "ui",
)  # fmt: skip
CLI_REFERENCE = "docs/cli-reference.md"

SAMPLES: dict[str, Sample] = {
    "readme-bench": Sample(
        "README.md", "dashboard", command="tokenpace bench --requests 100 --output-len 32"
    ),
    "playbook-bench": Sample("docs/playbook.md", "dashboard", playbook_block="--out first.json"),
    "playbook-intervals": Sample("docs/playbook.md", "lines", playbook_block="95% interval of P95"),
    **{
        "help-" + c.replace(" ", "-"): Sample(CLI_REFERENCE, "help", command=f"tokenpace {c} --help")
        for c in COMMANDS
    },
}

_BOX = re.compile(r"[│┃┏┓┗┛━─┳┻╇╈┡┩└┘┴┬├┤┼╭╮╰╯═║]")
_RUN_ID = re.compile(r"\b[0-9a-f]{12}\b")
_NUMBER = re.compile(r"[~+\-−]?\d[\d,.:]*(?:[eE][+-]?\d+)?")


def documented(doc: str) -> dict[str, str]:
    """The samples a page shows, by name."""
    return {m.group(1): m.group(2) for m in MARKER.finditer((ROOT / doc).read_text(encoding="utf-8"))}


def replace(text: str, name: str, block: str) -> str:
    """``text`` (a page) with sample ``name``'s block replaced by ``block``."""

    def swap(m: re.Match[str]) -> str:
        if m.group(1) != name:
            return m.group(0)
        return f"<!-- sample: {name} -->\n```text\n{block.rstrip()}\n```"

    return MARKER.sub(swap, text)


def mask(line: str) -> str:
    """A line with its figures, run ids and box drawing taken out, spaces collapsed."""
    line = _RUN_ID.sub("ID", _BOX.sub(" ", line))
    line = _NUMBER.sub("#", line)
    words = line.split()
    out: list[str] = []
    for w in words:
        if not (w == "#" and out and out[-1] == "#"):  # a wrapped or widened cell is one figure
            out.append(w)
    return " ".join(out)


def shape(text: str, kind: str) -> list[str]:
    if kind == "help":
        return _help_shape(text)
    return _dashboard_shape(text) if kind == "dashboard" else _lines_shape(text)


def help_text(command: str) -> str:
    """``tokenpace ... --help`` as a terminal 80 columns wide prints it, run in this process."""
    from click.testing import CliRunner

    from tokenpace.cli.main import cli

    args = command.split()[1:]
    result = CliRunner().invoke(cli, args, terminal_width=80, prog_name="tokenpace")
    assert result.exit_code == 0, (command, result.output)
    return result.output


def _help_shape(text: str) -> list[str]:
    """The usage line's command and every option a --help lists, in order."""
    found = [m.group(1) for m in re.finditer(r"^Usage: (tokenpace(?: [a-z-]+)*)", text, re.M)]
    found += re.findall(r"^  (?:-\w, )?(--?[\w-]+)", text, re.M)
    return found


def _dashboard_shape(text: str) -> list[str]:
    """The panel's sections and its tables' columns and row labels, in order: what stays the same
    from one run to the next (wrapping, which moves with the figures' widths, and the notes under
    the panel, which depend on the host, are left out)."""
    found: list[str] = []
    for raw in text.splitlines():
        inner = raw.strip()
        if not inner.startswith("│") or not inner.endswith("│"):
            continue  # the panel's frame, and the lines printed after it
        inner = inner[1:-1].rstrip()
        inner = inner[1:] if inner.startswith(" ") else inner  # the panel's padding
        if inner.startswith("note:"):
            break
        cell = inner.strip()
        if cell[:1] in {"┃", "│"}:  # a table's header row or body row: its first cell
            cells = [c.strip() for c in re.split(r"[┃│]", cell)[1:-1]]
            if cells and cells[0]:
                found.append(("header " if cell[0] == "┃" else "row ") + mask(" ".join(cells[:1])))
            if cell[0] == "┃":
                found.append("columns " + mask(" ".join(cells)))
        elif inner[:1] not in {" ", ""} and (found or inner.startswith("Latency")):
            label = mask(re.split(r"\s{2,}|\s\d", inner, maxsplit=1)[0])  # a section, at the left edge
            if label:  # not a table's top or bottom rule
                found.append("section " + label)
    return [f for f in found if f not in READINGS_SECTIONS]


# Sections shown only when a reading arrived in the steady window (the GPU gauges are scraped once a
# second): present in one run of a sample's command and not in the next, so never part of its shape.
READINGS_SECTIONS = {"section GPU"}


def _lines_shape(text: str) -> list[str]:
    return [mask(line) for line in text.splitlines() if line.strip()]


def matches(documented_text: str, actual: str, kind: str) -> bool:
    """Whether a documented block has the shape of a real run's output. For "lines", a `...` line
    in the documented block stands for any number of lines (a trimmed sample)."""
    if kind in {"dashboard", "help"}:
        return shape(documented_text, kind) == shape(actual, kind)
    parts: list[list[str]] = [[]]
    for line in _lines_shape(documented_text):
        if line.strip() == "...":
            parts.append([])
        else:
            parts[-1].append(line)
    got, at = _lines_shape(actual), 0
    for i, part in enumerate(parts):
        if not part:
            continue
        if i == 0:
            if got[: len(part)] != part:
                return False
            at = len(part)
            continue
        found = next((j for j in range(at, len(got) - len(part) + 1) if got[j : j + len(part)] == part), -1)
        if found < 0:
            return False
        at = found + len(part)
    return at == len(got) or bool(parts[-1] == [])
