"""Parsers for command-line values; each raises click.BadParameter with a message for the user."""

from __future__ import annotations

import re
import sys
from typing import NoReturn

import click

from tokenpace.core.lengths import LengthDist, LengthSpecError, parse_length
from tokenpace.core.metrics import Slo

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


def duration_s(text: str, what: str = "duration") -> float:
    match = _DURATION.match(text)
    if not match:
        raise click.BadParameter(f"{text!r} is not a {what}; use e.g. 500ms, 60s, 2m")
    return float(match.group(1)) * _UNIT_S[match.group(2)]


def length(text: str) -> LengthDist:
    try:
        return parse_length(text)
    except LengthSpecError as exc:
        raise click.BadParameter(str(exc)) from None


def slo(text: str | None) -> Slo:
    if not text:
        return Slo()
    values: dict[str, float] = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        key = key.strip().lower()
        if not sep or key not in ("ttft", "tpot", "e2e"):
            raise click.BadParameter(
                f"{part!r}: SLOs are ttft=, tpot= or e2e= with a duration, e.g. ttft=500ms,tpot=50ms"
            )
        values[f"{key}_ms"] = duration_s(value, "duration") * 1000
    return Slo(**values)


def key_values(items: tuple[str, ...], sep: str, what: str) -> dict[str, str]:
    out = {}
    for item in items:
        key, found, value = item.partition(sep)
        if not found or not key.strip():
            raise click.BadParameter(f"{item!r}: expected {what}")
        out[key.strip()] = value.strip()
    return out


def die(cmd: str, message: str, code: int = 2) -> NoReturn:
    """Bad input: one line on stderr, exit 2 (never a usage block or a traceback)."""
    click.echo(f"tokenpace {cmd}: error: {message}", err=True)
    sys.exit(code)
