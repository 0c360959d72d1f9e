"""(input tokens, output tokens) pairs from a request log, JSONL or CSV.

Field pairs looked for, in this order (dots step into nested objects); the first pair the first
record has is used for every record:
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from tokenpace.adapters.datasets.rows import fail, lookup, table_records, whole_number

LENGTH_FIELDS = (
    ("usage.prompt_tokens", "usage.completion_tokens"),  # OpenAI responses and logs
    ("response.usage.prompt_tokens", "response.usage.completion_tokens"),
    ("response.body.usage.prompt_tokens", "response.body.usage.completion_tokens"),  # OpenAI batch output
    ("usage.input_tokens", "usage.output_tokens"),  # Responses API, Anthropic
    ("input_tokens", "output_tokens"),
    ("prompt_tokens", "completion_tokens"),
    ("input_len", "output_len"),
    ("input_length", "output_length"),  # Mooncake traces
    ("ContextTokens", "GeneratedTokens"),  # Azure LLM inference traces
    ("Request tokens", "Response tokens"),  # BurstGPT (vLLM's --dataset-name burstgpt)
)
# BurstGPT logs failed requests with 0 response tokens: skipped, as vLLM's reader skips them
_SKIP_ZERO_OUTPUT = {"Response tokens"}
__doc__ = (__doc__ or "") + "\n".join(f"    {a}, {b}" for a, b in LENGTH_FIELDS) + "\n"


def _pick(obj: dict[str, Any]) -> tuple[str, str] | None:
    for a, b in LENGTH_FIELDS:
        if lookup(obj, a) is not None and lookup(obj, b) is not None:
            return a, b
    return None


def read_length_pairs(path: str | Path) -> tuple[np.ndarray, dict[str, Any]]:
    """An (n, 2) array of (input, output) token counts and a description; raises DatasetError."""
    path = Path(path)
    fields: tuple[str, str] | None = None
    pairs: list[tuple[int, int]] = []
    for line, obj in table_records(path):
        if fields is None:
            fields = _pick(obj)
            if fields is None:
                names = ", ".join(f"{a}/{b}" for a, b in LENGTH_FIELDS[:6])
                raise fail(path, line, f"no token counts found; expected one of {names}, ...")
        a, b = fields
        if lookup(obj, a) is None or lookup(obj, b) is None:
            raise fail(path, line, f"missing {a if lookup(obj, a) is None else b}")
        if b in _SKIP_ZERO_OUTPUT and str(lookup(obj, b)).strip() in ("0", "0.0"):
            continue
        pairs.append(
            (whole_number(lookup(obj, a), path, line, a), whole_number(lookup(obj, b), path, line, b))
        )
    if not pairs:
        raise fail(path, None, "no records")
    assert fields is not None
    return np.asarray(pairs, dtype=np.int64), {"lengths_from": str(path), "fields": list(fields)}
