"""The one test factory for ``BenchConfig``: a test module names only what its tests depend on."""

from __future__ import annotations

from typing import Any

from tokenpace.app.run.bench_config import BenchConfig
from tokenpace.core.workload.lengths import parse_length


def bench_config(url: str, **fields: Any) -> BenchConfig:
    """A config for ``url``; the model is "m" unless given, and the lengths may be given as text
    (``input_len="16:64"``). Every other field is ``BenchConfig``'s own default."""
    fields.setdefault("model", "m")
    for key in ("input_len", "output_len"):
        if isinstance(fields.get(key), str):
            fields[key] = parse_length(fields[key])
    return BenchConfig(url=url, **fields)
