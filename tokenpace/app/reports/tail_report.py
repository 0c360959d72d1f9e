"""The HTML report's "where the P95+ requests' time went" (``tokenpace report RESULT --html FILE
--traces FILE``): the run's requests at or above its TTFT P95, the slowest ``MAX_TAIL_SHOWN`` of them
joined by trace id with their spans from a trace file and split hop by hop.

Memory: only the spans of those requests are kept (at most ``MAX_TAIL_SHOWN`` traces), whatever the
file's size; the rest of the file is only checked for the run's trace ids (a set of the run's own).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from tokenpace.app.reports.trace_tail import iter_spans
from tokenpace.core.analysis.diagnosis.hops import Hops, Span, by_trace, hops
from tokenpace.core.analysis.diagnosis.tail_hops import MAX_TAIL_SHOWN, TailHops, tail_hops, tail_requests
from tokenpace.core.record import RequestRecord

__all__ = ["MAX_TAIL_SHOWN", "TailHops", "trace_tail_of_run"]


def trace_tail_of_run(records: Sequence[RequestRecord], traces: Path) -> TailHops:
    """The run's P95+ requests with their hops from ``traces`` (ValueError: a bad file or no tail)."""
    _, _, slow = tail_requests(records)
    wanted = {r.trace_id for r in slow if r.trace_id and r.trace_sampled}
    run_ids = {r.trace_id for r in records if r.trace_id}
    kept: list[Span] = []
    file_has_run = False
    try:
        for span in iter_spans(traces):
            if span.trace_id in run_ids:
                file_has_run = True
                if span.trace_id in wanted:
                    kept.append(span)
    except FileNotFoundError:
        raise ValueError(f"{traces}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{traces}: unreadable ({exc})") from None
    joined: dict[str, Hops] = {}
    for trace_id, trace in by_trace(kept).items():
        h = hops(trace)
        if h is not None:
            joined[trace_id] = h
    return tail_hops(records, joined, file_has_run)
