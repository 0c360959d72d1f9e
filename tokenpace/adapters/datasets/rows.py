"""Records of a workload file with their line numbers: JSONL, a JSON array, or CSV."""

from __future__ import annotations

import csv
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson


class DatasetError(ValueError):
    """A workload file cannot be used; the message names the file and the line."""


def fail(path: Path | str, line: int | None, reason: str) -> DatasetError:
    where = f"{path}" + (f", line {line}" if line else "")
    return DatasetError(f"{where}: {reason}")


def _read_text(path: Path) -> str:
    if not path.exists():
        raise fail(path, None, "no such file")
    if path.is_dir():
        raise fail(path, None, "is a folder, not a file")
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise fail(path, None, f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise fail(path, None, exc.strerror or str(exc)) from None
    if not text.strip():
        raise fail(path, None, "the file is empty")
    return text


def json_records(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line, object) for each JSONL line, or for each item of a JSON array (line of the file
    where the array starts, item number in the message)."""
    text = _read_text(path)
    if text.lstrip().startswith("["):
        try:
            items = orjson.loads(text)
        except orjson.JSONDecodeError as exc:
            raise fail(path, None, f"not valid JSON ({exc})") from None
        for i, item in enumerate(items, 1):
            if not isinstance(item, dict):
                raise fail(path, None, f"item {i} of the JSON array is not an object")
            yield i, item
        return
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError:
            raise fail(path, n, f"not valid JSON: {line.strip()[:60]!r}") from None
        if not isinstance(obj, dict):
            raise fail(path, n, "expected a JSON object on each line")
        yield n, obj


def csv_records(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    text = _read_text(path)
    reader = csv.DictReader(text.splitlines())
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


def whole_number(value: Any, path: Path, line: int, name: str, minimum: int = 1) -> int:
    if isinstance(value, bool):
        raise fail(path, line, f"{name} must be a whole number, not {value!r}")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise fail(path, line, f"{name} must be a whole number, not {value!r}") from None
    if not math.isfinite(number) or number != int(number) or number < minimum:
        raise fail(path, line, f"{name} must be a whole number >= {minimum}, not {value!r}")
    return int(number)
