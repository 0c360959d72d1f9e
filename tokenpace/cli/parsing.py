"""Parsers for command-line values; each raises click.BadParameter with a message for the user."""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NoReturn

import click

from tokenpace.app.run.outputs import ExitStatus
from tokenpace.app.run.terms import MAX_TOKENS, LengthDist, LengthSpecError, Slo, header_problem, parse_length

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}
MAX_DURATION_S = 366 * 86400.0  # a year: longer is a typo, and would overflow the event loop's timers


@dataclass(frozen=True, slots=True)
class Bound:
    """The sane range of a numeric flag; absurd values (nan, inf, -1 seeds, 10^12 tokens) are refused
    before any work, with one line naming the flag."""

    low: float
    high: float
    low_open: bool = False  # ``low`` itself is not allowed (a rate of 0)

    def problem(self, value: float) -> str | None:
        finite = isinstance(value, int) or math.isfinite(value)  # nan fails every comparison below
        if finite and (value > self.low or (value == self.low and not self.low_open)) and value <= self.high:
            return None
        low = f"above {self.low:,g}" if self.low_open else f"at least {self.low:,g}"
        return f"must be a number {low} and at most {self.high:,}"


# Documented in docs/bench-reference.md ("Limits").
BENCH_BOUNDS: dict[str, Bound] = {
    "concurrency": Bound(1, 100_000),
    "max_concurrency": Bound(1, 100_000),
    "rate": Bound(0, 1_000_000, low_open=True),
    "burstiness": Bound(0, 1_000, low_open=True),
    "requests": Bound(1, 1_000_000_000),
    "warmup": Bound(0, 1_000_000),
    "seed": Bound(0, 2**63 - 1),
    "temperature": Bound(0, 100),
    "top_p": Bound(0, 1),
}
WORKLOAD_BOUNDS: dict[str, Bound] = {
    "speedup": Bound(0, 1_000_000, low_open=True),
    "block_tokens": Bound(1, MAX_TOKENS),
    "prefix_len": Bound(0, MAX_TOKENS),
    "prefixes": Bound(1, 100_000),
    "turns": Bound(1, 10_000),
}


def check_numbers(opts: Mapping[str, Any], bounds: Mapping[str, Bound] = BENCH_BOUNDS) -> None:
    """Each flag given (not None) within its bounds, else click.BadParameter naming the flag."""
    for key, bound in bounds.items():
        value = opts.get(key)
        if value is None:
            continue
        problem = bound.problem(value)
        if problem:
            shown = f"{value:g}" if isinstance(value, float) else str(value)
            raise click.BadParameter(f"--{key.replace('_', '-')} {shown}: {problem}")


def duration_s(text: str, what: str = "duration") -> float:
    match = _DURATION.match(text)
    if not match:
        named = f"{what} {text!r}: not a duration" if what.startswith("--") else f"{text!r} is not a {what}"
        raise click.BadParameter(f"{named}; use e.g. 500ms, 60s, 2m")
    seconds = float(match.group(1)) * _UNIT_S[match.group(2)]
    if seconds > MAX_DURATION_S:
        raise click.BadParameter(f"{what} {text!r}: at most 366 days")
    return seconds


def headers(items: tuple[str, ...]) -> dict[str, str]:
    """``--header NAME:VALUE`` items; a header value is never echoed (it may be a key)."""
    out = {}
    for item in items:
        name, found, value = item.partition(":")
        name, value = name.strip(), value.strip(" \t")  # a CR or LF is refused, not trimmed
        if not found or not name:
            raise click.BadParameter("--header: expected NAME:VALUE (the value is not shown)")
        problem = header_problem(name, value)
        if problem:
            raise click.BadParameter(f"--header: {problem}")
        out[name] = value
    return out


def length(text: str, flag: str = "") -> LengthDist:
    try:
        return parse_length(text)
    except LengthSpecError as exc:
        hint = "" if "such as" in str(exc) else "; a length is such as 512, 256:1024 or lognormal:512,0.5"
        raise click.BadParameter(f"{flag} {exc}{hint}".strip()) from None


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


def die(cmd: str, message: str, code: int = ExitStatus.REFUSED) -> NoReturn:
    """Bad input: one line on stderr, exit 2 (never a usage block or a traceback)."""
    click.echo(f"tokenpace {cmd}: error: {message}", err=True)
    sys.exit(code)


def workers(text: str) -> int | str:
    """--workers: a whole number of at least 1, or auto."""
    t = text.strip().lower()
    if t == "auto":
        return t
    if not t.isdigit() or int(t) < 1:
        raise click.BadParameter(f"--workers {text!r}: give a whole number of at least 1, or auto")
    return int(t)


def share(text: str, flag: str) -> float:
    """'5%' or '0.05' -> 0.05, between 0 and 1."""
    t = text.strip()
    try:
        value = float(t[:-1]) / 100 if t.endswith("%") else float(t)
    except ValueError:
        raise click.BadParameter(f"{flag} {text!r}: give a share, e.g. 5% or 0.05") from None
    if not 0 <= value <= 1:
        raise click.BadParameter(f"{flag} {text!r}: a share is between 0% and 100%")
    return value
