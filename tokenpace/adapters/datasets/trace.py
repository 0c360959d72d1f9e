"""Request traces to replay on their own clock, CSV or JSONL, with documented column mappings.

layout     timestamp                 input            output            shared prompt
generic    timestamp (s)             input_tokens     output_tokens     prefix_id [prefix_tokens], hash_ids
records    sent_ns (ns)              prompt_tokens    output_tokens     prefix_hashes, prefix_id
azure      TIMESTAMP (date and time) ContextTokens    GeneratedTokens   -
mooncake   timestamp (ms)            input_length     output_length     hash_ids (one per 512-token block)

The layout is told from the columns of the first record; ``time_unit`` overrides the unit of
numeric timestamps. Rows are replayed in timestamp order. ``records`` are request records, as the
gateway writes them (``--records``) or a bench run does: see ``core.workload.replay`` for what is
read from them.
"""

from __future__ import annotations

import math
import re
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from tokenpace.adapters.datasets.rows import fail, table_records, whole_number
from tokenpace.core.workload import TraceRow
from tokenpace.core.workload.replay import is_record, trace_from_records
from tokenpace.core.workload.trace import replay_problem

# layout -> (timestamp column, input column, output column, numeric timestamp unit in seconds)
TRACE_LAYOUTS: dict[str, tuple[str, str, str, float]] = {
    "azure": ("TIMESTAMP", "ContextTokens", "GeneratedTokens", 1.0),
    "mooncake": ("timestamp", "input_length", "output_length", 0.001),
    "generic": ("timestamp", "input_tokens", "output_tokens", 1.0),
}
_UNITS = {"auto": None, "s": 1.0, "ms": 0.001, "us": 1e-6}
_TIME_ALIASES = ("timestamp", "TIMESTAMP", "time", "arrival_time")


def _layout(obj: dict[str, Any]) -> str | None:
    for name, (ts, inp, out, _) in TRACE_LAYOUTS.items():
        if inp in obj and out in obj and any(k in obj for k in (ts, *_TIME_ALIASES)):
            return name
    return None


def _seconds(value: Any, unit: float, path: Path, line: int) -> float:
    seconds = _number_of_seconds(value, unit, path, line)
    if not math.isfinite(seconds):
        raise fail(path, line, f"timestamp {str(value)[:40]!r} is not a finite number of seconds")
    return seconds


def _number_of_seconds(value: Any, unit: float, path: Path, line: int) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value) * unit
    text = str(value).strip()
    try:
        return float(text) * unit
    except ValueError:
        pass
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise fail(path, line, f"timestamp {text[:40]!r} is neither a number nor a date and time") from None


def _hash_ids(value: Any, path: Path, line: int) -> tuple[int, ...]:
    if value is None or value == "":
        return ()
    if isinstance(value, str):
        try:
            value = (
                orjson.loads(value) if value.strip().startswith("[") else re.split(r"[\s;,]+", value.strip())
            )
        except orjson.JSONDecodeError:
            raise fail(path, line, f"hash_ids {value[:40]!r} is not a list") from None
    if not isinstance(value, list):
        raise fail(path, line, "hash_ids must be a list of integers")
    try:
        return tuple(int(v) for v in value if v != "")
    except (TypeError, ValueError):
        raise fail(path, line, f"hash_ids must be integers, not {value[:4]!r}") from None


def read_trace(path: str | Path, time_unit: str = "auto") -> tuple[list[TraceRow], dict[str, Any]]:
    """Rows sorted by time and a description; raises DatasetError."""
    path = Path(path)
    if time_unit not in _UNITS:
        raise fail(path, None, f"unknown time unit {time_unit!r}; choose from {', '.join(_UNITS)}")
    layout: str | None = None
    rows: list[TraceRow] = []
    records = table_records(path)
    for line, obj in records:
        if layout is None and is_record(obj):
            return _records_trace(path, [obj, *(o for _, o in records)])
        if layout is None:
            layout = _layout(obj)
            if layout is None:
                raise fail(
                    path,
                    line,
                    "unknown trace columns "
                    f"{sorted(obj)[:8]}; expected timestamp,input_tokens,output_tokens (or the Azure "
                    "TIMESTAMP,ContextTokens,GeneratedTokens or Mooncake timestamp,input_length,"
                    "output_length,hash_ids layouts)",
                )
        ts_col, in_col, out_col, unit = TRACE_LAYOUTS[layout]
        unit = _UNITS[time_unit] or unit
        ts_key = next((k for k in (ts_col, *_TIME_ALIASES) if obj.get(k) not in (None, "")), None)
        for key, what in ((ts_key, "timestamp"), (in_col, in_col), (out_col, out_col)):
            if key is None or obj.get(key) in (None, ""):
                raise fail(path, line, f"missing {what}")
        prefix = obj.get("prefix_id")
        prefix_tokens = obj.get("prefix_tokens")
        rows.append(
            TraceRow(
                timestamp_s=_seconds(obj[ts_key], unit, path, line),  # type: ignore[index]
                input_tokens=whole_number(obj[in_col], path, line, in_col),
                output_tokens=whole_number(obj[out_col], path, line, out_col),
                prefix_id=None if prefix in (None, "") else str(prefix),
                hash_ids=_hash_ids(obj.get("hash_ids"), path, line),
                prefix_tokens=None
                if prefix_tokens in (None, "")
                else whole_number(prefix_tokens, path, line, "prefix_tokens"),
            )
        )
    if not rows:
        raise fail(path, None, "no rows")
    rows.sort(key=lambda r: r.timestamp_s)
    return rows, {"trace": str(path), "layout": layout, "time_unit": time_unit}


def _records_trace(path: Path, objs: list[dict[str, Any]]) -> tuple[list[TraceRow], dict[str, Any]]:
    try:
        replay = trace_from_records(objs)
    except (KeyError, TypeError, ValueError, OverflowError) as exc:
        raise fail(path, None, f"request records cannot be replayed: {exc}") from None
    why = replay_problem(replay.rows, speedup=1.0)
    if why and "finite" in why:  # how long it replays is judged at its --speedup (WorkloadOptions)
        raise fail(path, None, why)
    return replay.rows, {"trace": str(path), **replay.description, "block_tokens": replay.block_tokens}
