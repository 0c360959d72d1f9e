"""A virtual run that keeps no records: each ladder step folded into bounded streaming summaries.

For runs too long to keep a record per request (about 1 KB each: a day at 100 req/s would hold ~9 GB),
`run_virtual(..., summary_only=True)` hands every finished request to a `StreamedStep` instead. It
buffers at most STREAM_BUFFER requests' numbers, then folds them into one `LogSketch` per metric
(TTFT, TPOT, E2E, engine queue: `core/sketch.py`, a fixed ~11 KB each, percentiles within 1 %) and
exact counters (requests, tokens, the window from the first send to the last completion, cache hits,
preemptions).
The metrics mean what they mean in `tokenpace.core.metrics` (TTFT = first token - sent, TPOT =
(E2E - TTFT) / (output tokens - 1) for more than one token, throughput over the window); what is
lost is the per-request record, the percentiles' confidence intervals and everything a record alone
gives (ITL gaps, steady-state windows, goodput). Memory is bounded by the requests in flight.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tokenpace.core.sketch import RELATIVE_ERROR, LogSketch
from tokenpace.core.stats import Distribution

SAMPLE_CAP = 2_000  # requests' TTFT, TPOT, E2E kept per step for select's attainment (~60 kB of JSON)
STREAM_BUFFER = 16_384  # finished requests' numbers held per step (~3 MB) before they are folded in
SUMMARY_ONLY_ABOVE = 1_000_000  # expected requests past which a virtual run keeps no records
RECORDS_NOT_KEPT = (
    "records not kept (summary only): percentiles from streaming sketches within "
    f"{RELATIVE_ERROR:.0%} relative error (their intervals from the sketches' ranks), no per-request rows"
)

# per finished request: sent, first token, finish (virtual s), output and prompt tokens, engine queue (s)
_COLUMNS = 6


@dataclass(slots=True)
class StreamedClient:
    """What a client would have measured over the step, from the sketches (the fields the step table
    reads from a `Summary`)."""

    counts: dict[str, int]
    ttft_ms: Distribution
    tpot_ms: Distribution
    e2e_ms: Distribution
    window_s: float
    request_throughput: float
    output_token_throughput: float
    total_token_throughput: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "ttft_ms": self.ttft_ms.to_dict(),
            "tpot_ms": self.tpot_ms.to_dict(),
            "e2e_ms": self.e2e_ms.to_dict(),
            "window_s": self.window_s,
            "request_throughput": self.request_throughput,
            "output_token_throughput": self.output_token_throughput,
            "total_token_throughput": self.total_token_throughput,
            "counts": dict(self.counts),
            "error_rate": 0.0,  # the engine model fails no request
            "records": RECORDS_NOT_KEPT,
        }


def with_engine_view(
    client: dict[str, Any], queue_ms: Distribution, cached_tokens: int, preemptions: int
) -> dict[str, Any]:
    """A step's JSON: the client's summary plus what only the engine knows (both summary kinds)."""
    return {
        **client,
        "engine": {
            "queue_ms": queue_ms.to_dict(),
            "cached_tokens": cached_tokens,
            "preemptions": preemptions,
        },
    }


@dataclass(slots=True)
class StreamedSummary:
    """A step of a summary-only run, shaped like `VirtualSummary` (client numbers plus the engine's)."""

    client: StreamedClient
    engine_queue_ms: Distribution
    cached_tokens: int
    preemptions: int
    # an even stride of the step's requests (ms; TPOT None for one output token), for a predicted
    # sweep; not in to_dict
    sample: dict[str, list[float | None]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return with_engine_view(
            self.client.to_dict(), self.engine_queue_ms, self.cached_tokens, self.preemptions
        )


@dataclass(slots=True)
class StreamedStep:
    """One ladder step's finished requests, folded as they come."""

    buffer: list[tuple[float, float, float, int, int, float]] = field(default_factory=list)
    sketches: dict[str, LogSketch] = field(
        default_factory=lambda: {m: LogSketch() for m in ("ttft", "tpot", "e2e", "queue")}
    )
    n: int = 0
    output_tokens: int = 0
    prompt_tokens: int = 0
    first_sent: float = math.inf
    last_end: float = -math.inf
    cached_tokens: int = 0
    preemptions: int = 0
    sample: StrideSample = field(default_factory=lambda: StrideSample(SAMPLE_CAP))

    def add(self, row: tuple[float, float, float, int, int, float], cached: int, preemptions: int) -> None:
        self.buffer.append(row)
        self.cached_tokens += cached
        self.preemptions += preemptions
        if len(self.buffer) >= STREAM_BUFFER:
            self.flush()

    def flush(self) -> None:
        if not self.buffer:
            return
        a = np.array(self.buffer, dtype=np.float64).reshape(-1, _COLUMNS)
        self.buffer.clear()
        sent, first, end, out, prompt, queue = a.T
        self.n += len(a)
        self.output_tokens += int(out.sum())
        self.prompt_tokens += int(prompt.sum())
        self.first_sent = min(self.first_sent, float(sent.min()))
        self.last_end = max(self.last_end, float(end.max()))
        ttft, e2e = (first - sent) * 1e3, (end - sent) * 1e3
        many = out > 1
        tpot = np.full(len(a), np.nan)
        tpot[many] = (end[many] - first[many]) * 1e3 / (out[many] - 1)
        self.sketches["ttft"].add_many(ttft)
        self.sketches["e2e"].add_many(e2e)
        self.sketches["tpot"].add_many(tpot[many])
        self.sketches["queue"].add_many(queue * 1e3)
        self.sample.add(np.stack([ttft, tpot, e2e], axis=1))

    def merge(self, other: StreamedStep) -> None:
        """Another replica's share of the same step."""
        self.flush()
        other.flush()
        for name, sketch in self.sketches.items():
            sketch.merge(other.sketches[name])
        self.n += other.n
        self.output_tokens += other.output_tokens
        self.prompt_tokens += other.prompt_tokens
        self.first_sent = min(self.first_sent, other.first_sent)
        self.last_end = max(self.last_end, other.last_end)
        self.cached_tokens += other.cached_tokens
        self.preemptions += other.preemptions
        self.sample.merge(other.sample)

    def summary(self) -> StreamedSummary:
        self.flush()
        window = self.last_end - self.first_sent if self.n else 0.0

        def per_s(x: float) -> float:
            return x / window if window > 0 else 0.0

        client = StreamedClient(
            counts={"sent": self.n, "ok": self.n},
            ttft_ms=self.sketches["ttft"].distribution(with_ci=True),
            tpot_ms=self.sketches["tpot"].distribution(with_ci=True),
            e2e_ms=self.sketches["e2e"].distribution(with_ci=True),
            window_s=window,
            request_throughput=per_s(self.n),
            output_token_throughput=per_s(self.output_tokens),
            total_token_throughput=per_s(self.output_tokens + self.prompt_tokens),
        )
        return StreamedSummary(
            client,
            self.sketches["queue"].distribution(),
            self.cached_tokens,
            self.preemptions,
            self.sample.to_dict(),
        )


class StrideSample:
    """Every stride-th row seen (TTFT, TPOT, E2E in ms), the stride doubled whenever more than `cap`
    are kept: an even stride through any number of requests in at most `cap` rows, without knowing
    the number up front."""

    __slots__ = ("cap", "rows", "seen", "stride")

    def __init__(self, cap: int) -> None:
        self.cap, self.stride, self.seen = cap, 1, 0
        self.rows = np.empty((0, 3))

    def add(self, rows: np.ndarray) -> None:
        kept = rows[(-self.seen) % self.stride :: self.stride]  # the rows whose index is a multiple
        self.seen += len(rows)
        self.rows = np.concatenate([self.rows, kept])
        self._thin()

    def merge(self, other: StrideSample) -> None:
        """Another replica's share (each thinned by its own stride: even within each share)."""
        self.rows = np.concatenate([self.rows, other.rows])
        self.seen += other.seen
        self.stride = max(self.stride, other.stride)
        self._thin()

    def _thin(self) -> None:
        while len(self.rows) > self.cap:
            self.rows = self.rows[::2]  # indices that are multiples of twice the stride
            self.stride *= 2

    def to_dict(self) -> dict[str, list[float | None]]:
        names = ("ttft_ms", "tpot_ms", "e2e_ms")
        return {
            name: [None if math.isnan(v) else round(v, 4) for v in self.rows[:, i].tolist()]
            for i, name in enumerate(names)
        }
