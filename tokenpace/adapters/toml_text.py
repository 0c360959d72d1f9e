"""TOML read with its nesting bounded: Python's TOML reader recurses once per array or inline table
inside another, so a file of a few kB nested thousands deep would end in a RecursionError (a
traceback). Every TOML the tool reads (profiles, gateway configurations, scenario files) is a few
tables of values: nesting past ``MAX_TOML_DEPTH`` is refused with the line where it went past."""

from __future__ import annotations

import sys
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, from PyPI
    import tomli as tomllib

MAX_TOML_DEPTH = 32  # arrays and inline tables inside each other (a table header counts 1 or 2)


class TomlError(ValueError):
    """Not TOML, or nested too deep: one line (the file's name is the caller's to add)."""


def loads(text: str) -> dict[str, Any]:
    """The document, or TomlError saying why not (never a RecursionError)."""
    line = too_deep(text)
    if line:
        raise TomlError(f"line {line}: arrays or tables nested more than {MAX_TOML_DEPTH} deep")
    try:
        doc: dict[str, Any] = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise TomlError(f"not valid TOML ({exc})") from None
    except RecursionError:  # a backstop: the scan above bounds the depth first
        raise TomlError(f"arrays or tables nested more than {MAX_TOML_DEPTH} deep") from None
    return doc


def too_deep(text: str) -> int:
    """The line (1-based) where brackets and braces outside strings and comments first nest past
    MAX_TOML_DEPTH; 0 when they never do. One pass, no recursion."""
    depth, line, i, n = 0, 1, 0, len(text)
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
        elif c == "#":
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        elif c in "\"'":
            quote = c * 3 if text.startswith(c * 3, i) else c
            i, line = _after_string(text, i + len(quote), quote, line)
            continue
        elif c in "[{":
            depth += 1
            if depth > MAX_TOML_DEPTH:
                return line
        elif c in "]}":
            depth = max(0, depth - 1)
        i += 1
    return 0


def _after_string(text: str, i: int, quote: str, line: int) -> tuple[int, int]:
    """Where the string that opened before ``i`` ends (past its closing quote), and the line then."""
    escapes = quote[0] == '"'
    n = len(text)
    while i < n:
        if escapes and text[i] == "\\":
            line += text[i + 1 : i + 2] == "\n"
            i += 2
            continue
        if text.startswith(quote, i):
            return i + len(quote), line
        if text[i] == "\n":
            line += 1
            if len(quote) == 1:  # a one-line string never spans lines: the parser will say so
                return i, line - 1
        i += 1
    return n, line
