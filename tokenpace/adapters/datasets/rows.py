"""Records of a workload file with their line numbers: JSONL, a JSON array, or CSV.

Bounded before anything is allocated from the file: a line is read at most ``MAX_LINE_BYTES`` at a
time (a longer one is refused, naming the line, never read whole), a JSON array or CSV file is read
whole only up to ``MAX_WHOLE_BYTES``, and a count read from a row (tokens) at most
``MAX_REQUEST_TOKENS`` (tokenpace.core.workload.trace).
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from tokenpace.adapters.bounded_read import FileBoundError, read_lines, read_text, size_text
from tokenpace.core.workload.trace import MAX_REQUEST_TOKENS

MAX_LINE_BYTES = 1024 * 1024  # one JSONL line or CSV row (real ones are bytes to a few KiB)
MAX_WHOLE_BYTES = 256 * 1024 * 1024  # a JSON array or CSV file, read whole


class DatasetError(ValueError):
    """A workload file cannot be used; the message names the file and the line."""


def fail(path: Path | str, line: int | None, reason: str) -> DatasetError:
    where = f"{path}" + (f", line {line}" if line else "")
    return DatasetError(f"{where}: {reason}")


def _check(path: Path) -> None:
    if not path.exists():
        raise fail(path, None, "no such file")
    if path.is_dir():
        raise fail(path, None, "is a folder, not a file")


def _read_text(path: Path) -> str:
    _check(path)
    try:
        text = read_text(path, MAX_WHOLE_BYTES, "a file read whole: split it into JSONL lines")
    except FileBoundError as exc:
        raise fail(path, exc.line, exc.reason) from None
    except OSError as exc:
        raise fail(path, None, exc.strerror or str(exc)) from None
    if not text.strip():
        raise fail(path, None, "the file is empty")
    return text


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    """(number, text) of each line, each read at most MAX_LINE_BYTES: a longer one is refused."""
    _check(path)
    try:
        for n, raw in read_lines(path, MAX_LINE_BYTES, "a workload line"):
            try:
                yield n, raw.decode("utf-8-sig" if n == 1 else "utf-8")
            except UnicodeDecodeError as exc:
                raise fail(path, n, f"not UTF-8 text ({exc.reason})") from None
    except FileBoundError as exc:
        raise fail(path, exc.line, exc.reason) from None
    except OSError as exc:
        raise fail(path, None, exc.strerror or str(exc)) from None


def _starts_array(path: Path) -> bool:
    _check(path)
    try:
        with path.open("rb") as f:
            head = f.read(4096).lstrip(b"\xef\xbb\xbf \t\r\n")
    except OSError as exc:
        raise fail(path, None, exc.strerror or str(exc)) from None
    return head.startswith(b"[")


def json_records(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line, object) for each JSONL line, or for each item of a JSON array (line of the file
    where the array starts, item number in the message)."""
    if _starts_array(path):
        text = _read_text(path)
        try:
            items = orjson.loads(text)
        except orjson.JSONDecodeError as exc:
            raise fail(path, None, f"not valid JSON ({exc})") from None
        for i, item in enumerate(items, 1):
            if not isinstance(item, dict):
                raise fail(path, None, f"item {i} of the JSON array is not an object")
            yield i, item
        return
    empty = True
    for n, line in _lines(path):
        if not line.strip():
            continue
        empty = False
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError:
            raise fail(path, n, f"not valid JSON: {line.strip()[:60]!r}") from None
        if not isinstance(obj, dict):
            raise fail(path, n, "expected a JSON object on each line")
        yield n, obj
    if empty:
        raise fail(path, None, "the file is empty")


def csv_records(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    text = _read_text(path)
    lines = text.splitlines()
    long = next((i for i, line in enumerate(lines, 1) if len(line) > MAX_LINE_BYTES), None)
    if long is not None:
        raise fail(path, long, f"line over {size_text(MAX_LINE_BYTES)}: not read")
    reader = csv.DictReader(lines)
    if not reader.fieldnames:
        raise fail(path, 1, "no header row")
    for row in reader:
        if None in row:
            raise fail(path, reader.line_num, "more cells than header columns")
        yield reader.line_num, {k.strip(): v for k, v in row.items() if k is not None}


def table_records(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """CSV for .csv files, JSON otherwise."""
    if path.suffix.lower() in (".csv", ".tsv"):
        return csv_records(path)
    return json_records(path)


def lookup(obj: dict[str, Any], dotted: str) -> Any:
    """obj['a']['b'] for 'a.b'; None when a step is missing."""
    cur: Any = obj
    for part in dotted.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return None
        cur = cur[part]
    return cur


def whole_number(
    value: Any, path: Path, line: int, name: str, minimum: int = 1, maximum: int = MAX_REQUEST_TOKENS
) -> int:
    if isinstance(value, bool):
        raise fail(path, line, f"{name} must be a whole number, not {value!r}")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise fail(path, line, f"{name} must be a whole number, not {value!r}") from None
    if not math.isfinite(number) or number != int(number) or number < minimum:
        raise fail(path, line, f"{name} must be a whole number >= {minimum}, not {value!r}")
    if number > maximum:
        raise fail(path, line, f"{name} {value!r} is past the bound of {maximum:,}")
    return int(number)
