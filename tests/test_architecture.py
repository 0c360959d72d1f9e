"""The layer map's size rules (ARCHITECTURE.md): small files with one job, short functions. The import
contracts and mypy run beside the tests in `make test` (lint-imports, mypy)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_FILE_LINES = 400
MAX_FUNCTION_LINES = 80


def _sources() -> list[Path]:
    return sorted(p for d in ("tokenpace", "benchmarks") for p in (ROOT / d).rglob("*.py"))


def test_no_file_over_400_lines() -> None:
    lines = {str(p.relative_to(ROOT)): p.read_text().count("\n") for p in _sources()}
    long = {name: n for name, n in lines.items() if n > MAX_FILE_LINES}
    assert not long, f"split these files: {long}"


def test_no_function_over_80_lines() -> None:
    long = {}
    for p in _sources():
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = (node.end_lineno or node.lineno) - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    long[f"{p.relative_to(ROOT)}:{node.name}"] = n
    assert not long, f"split these functions: {long}"


MAX_ROOM_MODULES = 15


def _packages() -> list[Path]:
    return sorted(p.parent for p in (ROOT / "tokenpace").rglob("__init__.py") if "_compiled" not in p.parts)


def test_every_room_holds_at_most_15_modules() -> None:
    sizes = {str(d.relative_to(ROOT)): len(list(d.glob("*.py"))) for d in _packages()}
    crowded = {name: n for name, n in sizes.items() if n > MAX_ROOM_MODULES}
    assert not crowded, f"split these folders by job (at most {MAX_ROOM_MODULES} modules each): {crowded}"


def test_every_room_says_what_it_owns() -> None:
    silent = [
        str(d.relative_to(ROOT))
        for d in _packages()
        if not ast.get_docstring(ast.parse((d / "__init__.py").read_text()))
    ]
    assert not silent, f"give these packages an __init__ docstring saying what the room owns: {silent}"
