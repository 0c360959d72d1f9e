"""Stretches of a run where requests were in flight and nothing came back. Pure.

A server that freezes for two seconds shows in few percentiles: in a closed loop only the requests
in flight at the time wait (a handful among hundreds), so TTFT P95 and goodput barely move while
every user on the service saw it stop. Every arrival (a token-carrying chunk or the end of a
request) is a sign of life; a *silence* is the time between two of them during which at least one
request was in flight (from the later of the first arrival and the earliest send still waiting).
One is reported when it lasts at least ``MIN_SILENCE_S`` and three times the run's typical longest
wait: the P95, over requests, of each request's longest wait for a sign of life (its TTFT or its
largest gap between tokens). A server whose first tokens always take seconds is slow, not stalled.
Counted per request, not per gap: a stall reaches only the requests in flight, so it moves this bar
only when it caught more than 5 % of the run's requests. (Per gap it did not: with few tokens a
request, the 4 frozen gaps of a 2 s freeze among ~400 made the ITL P99 0.8 s, and the bar, 2.5 s,
rose above the freeze it should have reported.)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tokenpace.core.metrics import itl_gaps_ns, ttft_ns
from tokenpace.core.record import RequestRecord, Status

MIN_SILENCE_S = 1.0
TYPICAL_FACTOR = 3.0
MAX_REPORTED = 5  # the longest few silences are kept (bounds the list in the result)


@dataclass(frozen=True, slots=True)
class Silence:
    start_s: float  # into the run (from its first send)
    length_s: float
    in_flight: int  # requests waiting through it

    def to_dict(self) -> dict[str, Any]:
        return {"start_s": self.start_s, "length_s": self.length_s, "in_flight": self.in_flight}


def _typical_s(records: Sequence[RequestRecord]) -> float:
    """P95 over ok requests of each one's longest wait for a sign of life (TTFT or largest gap), s."""
    worst = []
    for r in records:
        if r.status is not Status.OK or (first := ttft_ns(r)) is None:
            continue
        gaps = itl_gaps_ns(r)
        worst.append(max(first, max(gaps)) if gaps else first)
    return float(np.percentile(worst, 95)) / 1e9 if worst else 0.0


def silences(records: Sequence[RequestRecord]) -> tuple[list[Silence], float]:
    """The longest silences (longest first) and the threshold they passed, in seconds."""
    sent = [r for r in records if r.sent_ns and not r.warmup]
    arrivals = np.sort(
        np.asarray(
            [t for r in sent for t in r.token_ns] + [r.end_ns for r in sent if r.end_ns], dtype=np.int64
        )
    )
    threshold = max(MIN_SILENCE_S, TYPICAL_FACTOR * _typical_s(sent))
    if not sent or len(arrivals) == 0:
        return [], threshold
    t0 = min(r.sent_ns for r in sent)
    starts = np.concatenate(([t0], arrivals[:-1]))  # before the first arrival: from the first send
    gaps = arrivals - starts
    out = []
    for i in np.argsort(gaps)[::-1][: MAX_REPORTED * 4]:
        g0, g1 = int(starts[i]), int(arrivals[i])
        if (g1 - g0) / 1e9 < threshold:
            break
        waiting = [r for r in sent if r.sent_ns < g1 and (r.end_ns is None or r.end_ns >= g1)]
        if not waiting:
            continue
        begin = max(g0, min(r.sent_ns for r in waiting))
        if (g1 - begin) / 1e9 >= threshold:
            out.append(Silence((begin - t0) / 1e9, (g1 - begin) / 1e9, len(waiting)))
    out.sort(key=lambda s: -s.length_s)
    return out[:MAX_REPORTED], threshold


def silence_summary(records: Sequence[RequestRecord]) -> tuple[dict[str, Any], list[str]]:
    """What a run stores (``summary.silences``) and the warning it prints, if any."""
    found, threshold = silences(records)
    doc = {
        "threshold_s": threshold,
        "longest": [s.to_dict() for s in found],
        "definition": "time with requests in flight and no token or completion arriving",
    }
    if not found:
        return doc, []
    top = found[0]
    more = f" ({len(found)} such stretches)" if len(found) > 1 else ""
    warning = (
        f"the server sent nothing for {top.length_s:.1f} s at {top.start_s:.1f} s into the run, with "
        f"{top.in_flight} request(s) waiting{more}: a stall that percentiles and goodput can hide"
    )
    return doc, [warning]
