"""Scenario files (TOML): the defaults shipped in the package, and a user's file on top of them."""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

from tokenpace.adapters.bounded_read import FileBoundError, read_text
from tokenpace.adapters.toml_text import TomlError, loads
from tokenpace.core.analysis.selection.scenarios import ScenarioBook, ScenarioError, parse_book

DEFAULTS_NAME = "scenarios.toml"
MAX_SCENARIO_BYTES = 1024 * 1024  # a user's scenario file (TOML of a few scenarios)


def _parse(text: str, source: str) -> ScenarioBook:
    try:
        doc: dict[str, Any] = loads(text)
    except TomlError as exc:
        raise ScenarioError(f"{source}: {exc}") from None
    return parse_book(doc, source)


def default_book() -> ScenarioBook:
    text = resources.files("tokenpace.adapters").joinpath(DEFAULTS_NAME).read_text(encoding="utf-8")
    return _parse(text, "defaults")


def load_book(path: Path | None = None) -> ScenarioBook:
    """The default scenarios, with the user's file (when given) added on top: its names win."""
    book = default_book()
    if path is None:
        return book
    try:
        text = read_text(path, MAX_SCENARIO_BYTES, "a scenario file")
    except FileBoundError as exc:
        raise ScenarioError(f"cannot read the scenario file {exc}") from None
    except OSError as exc:
        raise ScenarioError(f"cannot read the scenario file {path}: {exc.strerror or exc}") from None
    return book.merged(_parse(text, str(path)))
