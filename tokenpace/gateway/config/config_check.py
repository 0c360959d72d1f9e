"""Every problem of a configuration at once: each value's own parse, then (only when they all
parsed) the whole. What ``tokenpace gateway --check-config`` prints and what a refused live reload
(SIGHUP, ``POST /tokenpace/config``) answers are this one list."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

T = TypeVar("T")


def every_problem(
    parts: Iterable[Callable[[], object]], build: Callable[[], T]
) -> tuple[T | None, list[str]]:
    """(the built value, []) or (None, one line per problem). A part or the build says a problem
    by raising ValueError; anything else is a bug and propagates."""
    problems: list[str] = []
    for part in parts:
        try:
            part()
        except ValueError as exc:
            problems += _lines(exc)
    if problems:
        return None, problems
    try:
        return build(), []
    except ValueError as exc:
        return None, _lines(exc)


def _lines(exc: ValueError) -> list[str]:
    """A problem's lines: one, or each of several found together (an ``errors`` list)."""
    errors = getattr(exc, "errors", None)
    return [str(e) for e in errors] if isinstance(errors, list) and errors else [str(exc)]
