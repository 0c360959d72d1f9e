"""docs/sim.md shows its commands (run by tests/docs/test_doc_commands.py) and its virtual-time
Python example works as shown."""

from __future__ import annotations

import shlex
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "sim.md"


def _blocks(lang: str) -> list[str]:
    """The fenced blocks whose opening fence names ``lang`` ("" for a bare fence)."""
    blocks: list[str] = []
    current: list[str] = []
    inside: str | None = None
    for line in DOC.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            if inside is None:
                inside, current = line[3:].strip(), []
            else:
                if inside == lang:
                    blocks.append("\n".join(current) + "\n")
                inside = None
        elif inside is not None:
            current.append(line)
    return blocks


def _commands() -> list[list[str]]:
    lines = [ln.split("#", 1)[0].strip() for block in _blocks("") for ln in block.splitlines()]
    return [shlex.split(ln)[1:] for ln in lines if ln.startswith("tokenpace sim")]


def test_the_doc_shows_serving_listing_and_virtual_commands():
    commands = _commands()
    assert sum("--virtual" in c for c in commands) >= 2
    assert any(c[1:] == [] for c in commands)  # plain `tokenpace sim`


# Every command of this doc (virtual, listing and serving) runs in tests/docs/test_doc_commands.py.


def test_the_virtual_time_python_example_runs(capsys):
    examples = [b for b in _blocks("python") if "run_virtual(" in b]
    assert len(examples) == 1
    exec(compile(examples[0], str(DOC), "exec"), {})
    printed = capsys.readouterr().out
    assert "'engine'" in printed and "'ttft_ms'" in printed
