"""Request records (the gateway's real traffic, or a bench run's) turned into a trace to replay:
arrival times, input and output lengths, shared prefix blocks, the API, and the prompt text where
the operator opted in to keeping it. Pure: records in (as ``RequestRecord.to_dict()`` mappings),
rows and a description out.

What a record cannot say is filled in, and counted in the description:
- input tokens: the prompt's own length as captured, so that the replay's server counts what the
  captured server counted: what the client asked for (a bench run's records), else the server's
  count less the tokens its chat template added (``template_tokens``: the median of server minus
  asked where records have both, else the intercept of the server's count against the prompt's
  characters when its standard error is under a token; when neither can be estimated the row is
  marked ``template_in_input`` and counted (``filled.input_with_template``): its length is the
  prompt's plus the template's, until the caller takes off the tokens a user states
  (``without_template``); a run warns of what is left), else the prompt's characters times the
  trace's median tokens per character (4 characters a token when no record has both). The replay's
  server adds its own template: counting the captured one too would send every prompt longer;
- output tokens: what the server produced, else what the client asked for (``max_tokens``), else the
  median of the answered requests (a request that failed before any output has no length to keep).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from tokenpace.core.workload.prompt_shape import BLOCK_CHARS
from tokenpace.core.workload.trace import MAX_REQUEST_TOKENS, TraceRow

DEFAULT_CHARS_PER_TOKEN = 4.0
MAX_TEMPLATE_TOKENS = 64  # a larger intercept is not a chat template's: taken as unknown (0)
MIN_FIT_RECORDS = 8  # records with a count and characters before the intercept is fitted
MIN_CHARS_SPREAD = 1.5  # longest / shortest prompt: below it the intercept is not identified
MAX_TEMPLATE_SE = 1.0  # tokens: a fitted intercept less precise than this is taken as unknown


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


def tokens_per_char(records: Sequence[Mapping[str, Any]], template: int = 0) -> float | None:
    """Median tokens per character over the records that know both (the server's count, less the
    ``template`` tokens it added)."""
    ratios = [
        max(t - template, 1) / c
        for r in records
        if (t := _count(r.get("prompt_tokens"))) and (c := _count(r.get("prompt_chars")))
    ]
    return float(np.median(ratios)) if ratios else None


def template_tokens(records: Sequence[Mapping[str, Any]]) -> tuple[int, str]:
    """Tokens the captured server's chat template added to each prompt, and how that is known:
    ``asked``: median of server count minus asked length; ``fit``: the intercept of the server's
    count against the prompt's characters; ``unknown``: 0."""
    both = [
        t - a
        for r in records
        if (t := _count(r.get("prompt_tokens"))) and (a := _count(r.get("prompt_tokens_requested")))
    ]
    if both:
        return int(min(max(round(float(np.median(both))), 0), MAX_TEMPLATE_TOKENS)), "asked"
    pairs = np.array(
        [
            (c, t)
            for r in records
            if (t := _count(r.get("prompt_tokens"))) and (c := _count(r.get("prompt_chars")))
        ],
        dtype=np.float64,
    )
    if len(pairs) < MIN_FIT_RECORDS or pairs[:, 0].max() < MIN_CHARS_SPREAD * pairs[:, 0].min():
        return 0, "unknown"
    (slope, intercept), cov = np.polyfit(pairs[:, 0], pairs[:, 1], 1, cov="unscaled")
    resid = pairs[:, 1] - (slope * pairs[:, 0] + intercept)
    se = float(np.sqrt(cov[1, 1] * float(resid @ resid) / max(len(pairs) - 2, 1)))
    if not 0 <= intercept <= MAX_TEMPLATE_TOKENS or slope <= 0 or se > MAX_TEMPLATE_SE:
        return 0, "unknown"
    return round(float(intercept)), "fit"


def trace_from_records(records: Iterable[Mapping[str, Any]]) -> ReplayTrace:
    """Rows in arrival order (warm-up requests of a bench run left out). Raises ValueError when no
    record is left to replay."""
    kept = [r for r in records if not r.get("warmup")]
    if not kept:
        raise ValueError("no request record to replay (warm-up requests are left out)")
    template, template_from = template_tokens(kept)
    ratio = tokens_per_char(kept, template)
    per_char = ratio if ratio is not None else 1.0 / DEFAULT_CHARS_PER_TOKEN
    answered = [n for r in kept if (n := _count(r.get("output_tokens")))]
    median_out = int(np.median(answered)) if answered else 1
    filled = {
        "input_from_chars": 0,
        "input_with_template": 0,
        "output_from_request": 0,
        "output_from_median": 0,
    }
    rows: list[TraceRow] = []
    for r in kept:
        inp = _count(r.get("prompt_tokens_requested"))
        with_template = False
        if inp is None and (server := _count(r.get("prompt_tokens"))):
            inp = max(1, server - template)
            with_template = template_from == "unknown"
            filled["input_with_template"] += with_template
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
                template_in_input=with_template,
            )
        )
    rows.sort(key=lambda row: row.timestamp_s)
    block_tokens = max(1, round(BLOCK_CHARS * per_char))
    description = {
        "layout": "records",
        "records": len(rows),
        "real_prompts": sum(row.prompt is not None for row in rows),
        "tokens_per_char": ratio,
        "template_tokens": {"tokens": template, "from": template_from},
        "filled": {k: v for k, v in filled.items() if v},
    }
    return ReplayTrace(rows, block_tokens, description)


def without_template(rows: Sequence[TraceRow], tokens: int) -> list[TraceRow]:
    """The rows whose input held the captured server's template (``template_in_input``) less the
    ``tokens`` a user states it added (``bench --trace-template-tokens``); the others as they are."""
    if not 0 <= tokens <= MAX_TEMPLATE_TOKENS:
        raise ValueError(f"template tokens must be 0 to {MAX_TEMPLATE_TOKENS} (a chat template's few tokens)")
    return [
        replace(r, input_tokens=max(1, r.input_tokens - tokens), template_in_input=False)
        if r.template_in_input
        else r
        for r in rows
    ]


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
