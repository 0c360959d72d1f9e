"""Where the P95+ requests' time went (the HTML report's tail section, issue 29): the requests at or
above the run's TTFT P95, the slowest of them joined with their hops (``hops.py``), and the median
share of the client's TTFT each hop took among them.

Pure: records and already-joined hops in, plain data out; the trace file is read by the app.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import median

import numpy as np

from tokenpace.core.analysis.diagnosis.hops import Hops
from tokenpace.core.metrics import ttft_ns
from tokenpace.core.record import RequestRecord, Status

MAX_TAIL_SHOWN = 50  # the slowest P95+ requests drawn; the rest of the tail is counted, not drawn

# The hops that add up to the client's TTFT, in path order (field of Hops, label); decode follows.
TTFT_HOPS = (
    ("client_gateway_ms", "client-gateway network"),
    ("to_engine_ms", "gateway and trip to the engine"),
    ("queue_ms", "engine queue"),
    ("prefill_ms", "engine prefill"),
    ("from_engine_ms", "return of the first token"),
)
DECODE_HOP = ("decode_ms", "engine decode (after TTFT)")


@dataclass(frozen=True, slots=True)
class TailRow:
    request_id: str
    trace_id: str | None
    ttft_ms: float
    sampled: bool  # sent with a trace context whose sampled flag was set
    hops: Hops | None  # None: unsampled, or its trace not wholly in the file


@dataclass(frozen=True, slots=True)
class TailHops:
    p95_ms: float
    above: int  # requests at or above the P95 (all of them; the slowest MAX_TAIL_SHOWN are rows)
    rows: tuple[TailRow, ...]  # slowest first
    run_traced: bool  # the run sent trace context at all (bench --otlp-endpoint)
    file_has_run: bool  # the trace file holds at least one of the run's trace ids

    @property
    def explained(self) -> list[TailRow]:
        return [r for r in self.rows if r.hops is not None]

    @property
    def unsampled(self) -> int:
        return sum(1 for r in self.rows if not r.sampled)

    @property
    def missing(self) -> int:
        """Sampled rows whose trace (client and engine spans, a first token) is not in the file."""
        return sum(1 for r in self.rows if r.sampled and r.hops is None)


def _ttft_ms(rec: RequestRecord) -> float | None:
    t = ttft_ns(rec)
    return None if t is None else t / 1e6


def tail_requests(
    records: Sequence[RequestRecord], limit: int = MAX_TAIL_SHOWN
) -> tuple[float, int, list[RequestRecord]]:
    """(TTFT P95 in ms, how many requests are at or above it, the slowest ``limit`` of them, slowest
    first). The P95 is the summary's: ok measured requests, linear interpolation."""
    timed = [
        (t, r) for r in records if not r.warmup and r.status is Status.OK and (t := _ttft_ms(r)) is not None
    ]
    if not timed:
        raise ValueError("the run has no ok request with a first token: no TTFT tail to follow")
    p95 = float(np.percentile([t for t, _ in timed], 95))
    tail = sorted((x for x in timed if x[0] >= p95), key=lambda x: x[0], reverse=True)
    return p95, len(tail), [r for _, r in tail[:limit]]


def tail_hops(
    records: Sequence[RequestRecord],
    joined: Mapping[str, Hops],
    file_has_run: bool,
    limit: int = MAX_TAIL_SHOWN,
) -> TailHops:
    """The tail of a run with each request's hops (``joined``: by trace id, the traces found)."""
    p95, above, slow = tail_requests(records, limit)
    rows = tuple(
        TailRow(
            r.request_id,
            r.trace_id,
            _ttft_ms(r) or 0.0,
            r.trace_id is not None and r.trace_sampled,
            joined.get(r.trace_id) if r.trace_id and r.trace_sampled else None,
        )
        for r in slow
    )
    traced = any(r.trace_id for r in records)
    return TailHops(p95, above, rows, traced, file_has_run)


def hop_ms(h: Hops) -> dict[str, float]:
    """The TTFT hops of one request in path order (no gateway: its hop is absent), then decode."""
    out = {name: float(v) for name, _ in TTFT_HOPS if (v := getattr(h, name)) is not None}
    out[DECODE_HOP[0]] = h.decode_ms
    return out


def median_shares(hops: Sequence[Hops]) -> dict[str, float]:
    """Per TTFT hop, the median over these requests of its share of the client's TTFT."""
    shares: dict[str, list[float]] = {}
    for h in hops:
        if h.client_ttft_ms <= 0:
            continue
        for name, v in hop_ms(h).items():
            if name != DECODE_HOP[0]:
                shares.setdefault(name, []).append(v / h.client_ttft_ms)
    return {name: median(shares[name]) for name, _ in TTFT_HOPS if name in shares}
