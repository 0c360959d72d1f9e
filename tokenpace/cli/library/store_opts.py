"""Options and helpers shared by the store commands (runs, compare, check, history, baseline, ab)."""

from __future__ import annotations

import functools
import re
import sys
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click

from tokenpace.app.baseline.store_ops import Store, StoreError, open_store, write_json
from tokenpace.app.run.outputs import ExitStatus

EXIT_BAD_INPUT = int(ExitStatus.REFUSED)
F = TypeVar("F", bound=Callable[..., Any])

STORE_HELP = (
    "Run store: a SQLite path or URL, or postgresql://user:pass@host/db "
    "(default: $TOKENPACE_STORE, else ~/.local/share/tokenpace/runs.db)."
)


def store_option(f: F) -> F:
    return click.option("--store", "store_url", metavar="URL", help=STORE_HELP)(f)


def bootstrap_options(f: F) -> F:
    """--resamples and --seed of the bootstrap behind a comparison's intervals (check, arms)."""
    f = click.option(
        "--seed",
        type=int,
        default=0,
        show_default=True,
        help="Seed of the bootstrap (the same seed gives the same intervals).",
    )(f)
    return click.option(
        "--resamples",
        type=int,
        default=1000,
        show_default=True,
        help="Bootstrap resamples for the confidence intervals.",
    )(f)


def fail(cmd: str, message: str, code: int = EXIT_BAD_INPUT) -> NoReturn:
    click.echo(f"tokenpace {cmd}: error: {message}", err=True)
    sys.exit(code)


def guarded(cmd: str) -> Callable[[F], F]:
    """Turn store and input errors into one line on stderr and exit 2, never a traceback."""

    def wrap(f: F) -> F:
        @functools.wraps(f)
        def inner(*args: Any, **kwargs: Any) -> Any:
            try:
                return f(*args, **kwargs)
            except (StoreError, ValueError, click.BadParameter) as exc:
                fail(cmd, exc.format_message() if isinstance(exc, click.ClickException) else str(exc))
            except OSError as exc:
                fail(cmd, f"{exc.strerror or exc}: {exc.filename or ''}".rstrip(": "))

        return inner  # type: ignore[return-value]

    return wrap


def open_or_fail(cmd: str, url: str | None, writable: bool = False) -> Store:
    """The store; commands that only read or edit saved runs (not ``writable``) need it to exist."""
    try:
        return open_store(url, writable=writable, existing=not writable)
    except StoreError as exc:
        fail(cmd, str(exc))


_RELATIVE = re.compile(r"^(\d+(?:\.\d+)?)\s*(m|h|d|w)$")
_UNIT_S = {"m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_when(text: str | None, now: float | None = None) -> float | None:
    """``7d`` / ``12h`` / ``30m`` / ``2w`` ago, or an ISO date or time (UTC unless it says otherwise)."""
    if text is None:
        return None
    text = text.strip()
    m = _RELATIVE.match(text)
    if m:
        return (now if now is not None else time.time()) - float(m.group(1)) * _UNIT_S[m.group(2)]
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(
            f"{text!r} is not a time: use e.g. 7d, 12h, 2024-05-01 or 2024-05-01T12:00"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return when.timestamp()


def parse_percent(text: str, what: str) -> float:
    """``1%`` or ``0.01`` -> 0.01."""
    t = text.strip()
    try:
        return float(t[:-1]) / 100 if t.endswith("%") else float(t)
    except ValueError:
        raise ValueError(f"{what} {text!r}: expected a percentage like 1%") from None


def parse_percentiles(text: str) -> list[float]:
    out = []
    for part in (p.strip().lower().lstrip("p") for p in text.split(",") if p.strip()):
        try:
            q = float(part)
        except ValueError:
            raise ValueError(f"percentiles {text!r}: expected e.g. 50,95,99") from None
        if not 0 < q < 100:
            raise ValueError(f"percentile {part} is not between 0 and 100")
        out.append(q)
    if not out:
        raise ValueError("no percentile given")
    return out


def write_report(path: Path, data: dict[str, Any]) -> None:
    write_json(path, data)


def ago(unix: float) -> str:
    return datetime.fromtimestamp(unix, timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ")
