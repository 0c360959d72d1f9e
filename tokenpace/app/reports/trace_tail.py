"""Follow the tail (``tokenpace runs show RUN --slowest N --traces FILE``): a run's slowest requests
by TTFT, joined by trace id with their spans from a trace file, and split hop by hop
(core/analysis/diagnosis/hops.py).

The file is JSON lines: spans as tokenpace's test receiver writes them, or OTLP JSON exports as the
OpenTelemetry Collector's file exporter writes them. Only the spans of the N requests asked about
are kept, so memory is bounded by N times the spans of one trace, whatever the file's size.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tokenpace.adapters.bounded_read import read_lines
from tokenpace.core.analysis.diagnosis.hops import Hops, Span, by_trace, hops, spans_from_json
from tokenpace.core.record import RequestRecord

MAX_SPAN_LINE_BYTES = 64 * 1024 * 1024  # one line: a span, or a collector's export batch


@dataclass(frozen=True, slots=True)
class TailRequest:
    record: RequestRecord
    ttft_ms: float
    hops: Hops | None  # None: its trace is not (wholly) in the file


def slowest_traced(records: list[RequestRecord], n: int) -> list[RequestRecord]:
    """The ``n`` traced requests with the longest TTFT, slowest first (unsampled ones have no spans)."""
    traced = [
        r for r in records if r.trace_id and r.trace_sampled and r.first_token_ns is not None and not r.warmup
    ]
    return sorted(traced, key=lambda r: (r.first_token_ns or 0) - r.sent_ns, reverse=True)[:n]


def iter_spans(path: Path) -> Iterator[Span]:
    """Every span of a JSON-lines trace file, one line at a time (ValueError on a line that is not)."""
    for number, line in read_lines(path, MAX_SPAN_LINE_BYTES, "a trace file"):
        if not line.strip():
            continue
        try:
            spans = spans_from_json(json.loads(line))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"{path}:{number}: not an OTLP JSON or span line ({exc})") from None
        yield from spans


def load_spans(path: Path, trace_ids: set[str]) -> dict[str, list[Span]]:
    """The spans of these traces in a JSON-lines trace file (ValueError on a line that is not)."""
    return by_trace(s for s in iter_spans(path) if s.trace_id in trace_ids)


def follow_tail(records: list[RequestRecord], n: int, traces: Path) -> list[TailRequest]:
    if n < 1:
        raise ValueError("--slowest must be at least 1")
    slow = slowest_traced(records, n)
    if not slow:
        raise ValueError(
            "the run has no traced (sampled) requests with a first token (run bench with --otlp-endpoint)"
        )
    spans = load_spans(traces, {r.trace_id for r in slow if r.trace_id})
    return [
        TailRequest(r, ((r.first_token_ns or 0) - r.sent_ns) / 1e6, hops(spans.get(r.trace_id or "", [])))
        for r in slow
    ]
