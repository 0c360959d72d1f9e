"""The percentiles a person asked for (``--percentiles 50,90,99,99.9``), each with its 95 %
confidence interval (the order-statistic interval of core.stats) and whether it rests on too few
samples. Pure: records in, numbers out. The same samples as the summary's distributions: measured,
successful requests; TTFT, TPOT, ITL (every gap) and E2E in milliseconds."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tokenpace.core.metrics import e2e_ns, itl_gaps_ns, tpot_ns, ttft_ns
from tokenpace.core.record import RequestRecord, Status
from tokenpace.core.stats import enough_samples, percentile_cis

MAX_ASKED = 12  # percentiles one command may ask for (each is a column people read)
DEFAULT_ASKED = (50.0, 90.0, 95.0, 99.0)

_SAMPLES: dict[str, Callable[[Sequence[RequestRecord]], list[float]]] = {
    "ttft_ms": lambda ok: [t / 1e6 for r in ok if (t := ttft_ns(r)) is not None],
    "tpot_ms": lambda ok: [t / 1e6 for r in ok if (t := tpot_ns(r)) is not None],
    "itl_ms": lambda ok: [g / 1e6 for r in ok for g in itl_gaps_ns(r)],
    "e2e_ms": lambda ok: [t / 1e6 for r in ok if (t := e2e_ns(r)) is not None],
}


def percentile_name(p: float) -> str:
    """50 -> 'p50', 99.9 -> 'p99.9'."""
    return f"p{int(p)}" if float(p).is_integer() else f"p{p:g}"


def parse_percentiles(text: str, flag: str = "--percentiles") -> tuple[float, ...]:
    """'50,90,99,99.9' -> (50.0, 90.0, 99.0, 99.9); ValueError naming the flag."""
    try:
        values = tuple(float(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise ValueError(f"{flag} {text!r}: numbers between 0 and 100, e.g. 50,90,99,99.9") from None
    if not values or not all(0 < v < 100 for v in values):
        raise ValueError(f"{flag} {text!r}: each strictly between 0 and 100, e.g. 50,90,99,99.9")
    if len(values) > MAX_ASKED:
        raise ValueError(f"{flag}: at most {MAX_ASKED} percentiles")
    return tuple(sorted(set(values)))


def asked_percentiles(records: Sequence[RequestRecord], asked: Sequence[float]) -> dict[str, Any]:
    """{"asked": [...], "metrics": {"ttft_ms": [{"name", "p", "value", "ci95", "low_sample"}, ...]}}"""
    ok = [r for r in records if not r.warmup and r.sent_ns and r.status is Status.OK]
    metrics: dict[str, list[dict[str, Any]]] = {}
    for key, samples_of in _SAMPLES.items():
        values = np.sort(np.asarray(samples_of(ok), dtype=np.float64))
        if not values.size:
            continue
        points = np.percentile(values, list(asked))
        cis = percentile_cis(values, list(asked))
        metrics[key] = [
            {
                "name": percentile_name(p),
                "p": p,
                "value": float(v),
                "ci95": [lo, hi],
                "low_sample": not enough_samples(values.size, p),
            }
            for p, v, (lo, hi) in zip(asked, points, cis, strict=True)
        ]
    return {"asked": list(asked), "metrics": metrics}
