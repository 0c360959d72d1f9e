"""Request records (the gateway's real traffic, or a bench run's) turned into a trace to replay:
arrival times, input and output lengths, shared prefix blocks, the API, and the prompt text where
the operator opted in to keeping it. Pure: records in (as ``RequestRecord.to_dict()`` mappings),
rows and a description out.

What a record cannot say is filled in, and counted in the description:
- input tokens: the server's count, else what the client asked for, else the prompt's characters
  times the trace's median tokens per character (4 characters a token when no record has both);
- output tokens: what the server produced, else what the client asked for (``max_tokens``), else the
  median of the answered requests (a request that failed before any output has no length to keep).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tokenpace.core.workload.prompt_shape import BLOCK_CHARS
from tokenpace.core.workload.trace import MAX_REQUEST_TOKENS, TraceRow

DEFAULT_CHARS_PER_TOKEN = 4.0


def is_record(obj: Mapping[str, Any]) -> bool:
    """A request record's mapping (gateway or bench), told from the fields only records have."""
    return "sent_ns" in obj and "status" in obj and "request_id" in obj


def _count(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        return None
    if value > MAX_REQUEST_TOKENS:  # a count no request has: refused before anything is sized by it
        raise ValueError(f"a count of {value:.0f} is past the bound of {MAX_REQUEST_TOKENS:,} per request")
    return int(value) if value > 0 else None


@dataclass(frozen=True, slots=True)
class ReplayTrace:
    rows: list[TraceRow]
    block_tokens: int  # tokens one prefix hash stands for in these records
    description: dict[str, Any]


def tokens_per_char(records: Sequence[Mapping[str, Any]]) -> float | None:
    """Median tokens per character over the records that know both (the server's count)."""
    ratios = [
        t / c
        for r in records
        if (t := _count(r.get("prompt_tokens"))) and (c := _count(r.get("prompt_chars")))
    ]
    return float(np.median(ratios)) if ratios else None


def trace_from_records(records: Iterable[Mapping[str, Any]]) -> ReplayTrace:
    """Rows in arrival order (warm-up requests of a bench run left out). Raises ValueError when no
    record is left to replay."""
    kept = [r for r in records if not r.get("warmup")]
    if not kept:
        raise ValueError("no request record to replay (warm-up requests are left out)")
    ratio = tokens_per_char(kept)
    per_char = ratio if ratio is not None else 1.0 / DEFAULT_CHARS_PER_TOKEN
    answered = [n for r in kept if (n := _count(r.get("output_tokens")))]
    median_out = int(np.median(answered)) if answered else 1
    filled = {"input_from_chars": 0, "output_from_request": 0, "output_from_median": 0}
    rows: list[TraceRow] = []
    for r in kept:
        inp = _count(r.get("prompt_tokens")) or _count(r.get("prompt_tokens_requested"))
        if inp is None:
            filled["input_from_chars"] += 1
            inp = max(1, round((_count(r.get("prompt_chars")) or 1) * per_char))
        out = _count(r.get("output_tokens"))
        if out is None:
            out = _count(r.get("output_tokens_requested"))
            filled["output_from_request" if out else "output_from_median"] += 1
            out = out or median_out
        labels = r.get("labels") or {}
        prefix = r.get("prefix_id")
        hashes = r.get("prefix_hashes") or ()
        text = r.get("prompt_text")
        rows.append(
            TraceRow(
                timestamp_s=int(r["sent_ns"]) / 1e9,
                input_tokens=inp,
                output_tokens=out,
                prefix_id=None if prefix is None else str(prefix),
                hash_ids=tuple(int(h) for h in hashes),
                api=labels.get("api") if isinstance(labels, Mapping) else None,
                prompt=text if isinstance(text, str) and text else None,
            )
        )
    rows.sort(key=lambda row: row.timestamp_s)
    block_tokens = max(1, round(BLOCK_CHARS * per_char))
    description = {
        "layout": "records",
        "records": len(rows),
        "real_prompts": sum(row.prompt is not None for row in rows),
        "tokens_per_char": ratio,
        "filled": {k: v for k, v in filled.items() if v},
    }
    return ReplayTrace(rows, block_tokens, description)


def window(rows: Sequence[TraceRow], start_s: float, end_s: float | None) -> list[TraceRow]:
    """The rows that arrived from ``start_s`` to before ``end_s`` seconds after the first one."""
    if not rows:
        return []
    t0 = rows[0].timestamp_s
    return [
        r for r in rows if r.timestamp_s - t0 >= start_s and (end_s is None or r.timestamp_s - t0 < end_s)
    ]


def only_api(rows: Sequence[TraceRow], api: str) -> tuple[list[TraceRow], dict[str, int]]:
    """The rows made to ``api`` (rows that do not say which API are kept), and how many rows of
    each other API were left out: one run speaks one API."""
    kept: list[TraceRow] = []
    left: dict[str, int] = {}
    for row in rows:
        if row.api is None or row.api == api:
            kept.append(row)
        else:
            left[row.api] = left.get(row.api, 0) + 1
    return kept, left


def parse_window(text: str, seconds: Any) -> tuple[float, float | None]:
    """``FROM:TO`` (either side may be empty) with each side read by ``seconds`` (a duration parser:
    ``90``, ``10m``); ValueError with the reason."""
    start_text, sep, end_text = text.partition(":")
    if not sep:
        raise ValueError(f"--trace-window {text!r}: give FROM:TO (e.g. 10m:70m, or :30m)")
    start = float(seconds(start_text)) if start_text.strip() else 0.0
    end = float(seconds(end_text)) if end_text.strip() else None
    if start < 0 or (end is not None and end <= start):
        raise ValueError(f"--trace-window {text!r}: TO must come after FROM, both from the trace's start")
    return start, end
