"""The steady state of a run: the part of it that ran at the load asked. Pure: records in, numbers out.

A run starts with a ramp-up and ends with a drain, and neither runs at the load asked:
- ramp-up: until the load was reached (closed loop: the C-th user's first send; open loop: the first
  send) and the first requests completed (before that nothing can complete, whatever the load). In a
  closed loop that is the first C completions, one wave: C users started together finish their first
  requests together, and a window opening inside that wave would count it as if it took no time;
- drain: after the last request was sent, requests in flight finish and none replaces them.
The steady window is what lies between. The rate the server sustained at that load is measured over
it; throughput over the whole run (first send to last completion) is lower by the share of ramp-up
and drain, which is large in a short run.

How the rate is measured (Little's law, L = X x W, holds by construction):
- closed loop: X = L / W, where L is the time-average number of successful requests in flight over
  the window (from each record's send and end: measured, never more than the C users) and W the mean
  E2E of the successful requests in flight at some point of it (every request sent at full load after
  the first wave, the one sent last included: X = C / W when no user idles). Counting completions
  inside the window
  is wrong on an engine that finishes requests in waves (C users' requests end together): a window
  whose ends fall between waves holds the fast waves and not the slow ones, and the count can put
  more than C in flight (seen: 31.4 req/s at 64 users on a GPU engine whose waves took 1.3-3.5 s,
  where 26.8 is right). L / W weighs each request by its own latency, whatever the waves' phase;
- open loop: the arrivals set the pace, so X = successful completions inside the window per second
  of it (a growing queue shows as X below the send rate).
Either way the result carries W and the measured L (all requests), so a check of X x W against the
load compares like with like.

A run is *short* when its steady window is under ``MIN_STEADY_FRACTION`` of its wall time (first send
to last completion) or holds fewer than ``MIN_STEADY_COMPLETIONS`` successful completions: its
throughput and the latencies of its few steady requests say little about the load it claims.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from tokenpace.core.record import RequestRecord, Status

MIN_STEADY_FRACTION = 0.5
MIN_STEADY_COMPLETIONS = 20
TARGET_STEADY_FRACTION = 0.6  # what a lengthened run aims at (margin over the minimum)
MAX_LENGTHEN_FACTOR = 8
NS_PER_S = 1_000_000_000

DEFINITION = (
    "steady window: from when the load was reached (closed loop: the C-th user's first send; open "
    "loop: the first send), the first requests completed (closed loop: C of them) and any ramp-up "
    "asked for (--ramp-up) ended, to the last "
    "send (after it, the run drains); throughput: closed loop, the successful requests' mean number "
    "in flight over the window divided by their mean E2E (Little's law; a count of completions is "
    "biased by waves); open loop, successful completions inside it per second of it. short: steady window "
    f"under {MIN_STEADY_FRACTION:.0%} of the wall time or fewer than {MIN_STEADY_COMPLETIONS} "
    "completions inside it"
)


@dataclass(frozen=True, slots=True)
class SteadyState:
    wall_s: float  # first send to last completion
    ramp_s: float  # excluded at the start
    drain_s: float  # excluded at the end
    window_s: float  # the steady window itself
    send_span_s: float  # first send to last send
    completions: int  # ok requests that completed inside the window
    request_throughput: float | None  # completions / window
    output_token_throughput: float | None
    short: bool
    reason: str  # why it is short ("" when it is not)

    sends: int = 0  # measured requests sent
    mean_latency_s: float | None = None  # W: mean E2E of the requests the rate rests on
    in_flight: float | None = None  # L: time-average requests in flight over the window (all statuses)
    estimator: str = ""  # in_flight/latency (closed loop) | completions/window (open loop)

    @property
    def send_rate(self) -> float | None:
        """Requests sent per second, first send to last (what the schedule really offered)."""
        return (self.sends - 1) / self.send_span_s if self.sends > 1 and self.send_span_s > 0 else None

    @property
    def fraction(self) -> float:
        return self.window_s / self.wall_s if self.wall_s > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "window_s": self.window_s,
            "wall_s": self.wall_s,
            "excluded_ramp_up_s": self.ramp_s,
            "excluded_drain_s": self.drain_s,
            "fraction": self.fraction,
            "send_span_s": self.send_span_s,
            "send_rate": self.send_rate,
            "completions": self.completions,
            "request_throughput": self.request_throughput,
            "output_token_throughput": self.output_token_throughput,
            "short": self.short,
            "short_reason": self.reason,
            "mean_latency_s": self.mean_latency_s,
            "in_flight": self.in_flight,
            "estimator": self.estimator,
            "definition": DEFINITION,
        }


def _empty(reason: str, wall_s: float = 0.0, span_s: float = 0.0, sends: int = 0) -> SteadyState:
    return SteadyState(wall_s, wall_s, 0.0, 0.0, span_s, 0, None, None, True, reason, sends)


def steady_state(
    records: Iterable[RequestRecord], concurrency: int | None = None, ramp_s: float = 0.0
) -> SteadyState:
    """The steady window of a run's measured records; ``concurrency`` for a closed loop, None for an
    open loop; ``ramp_s``: a ramp-up asked for (--ramp-up) lasting this long after the first send is
    left out too (inf: the whole run was a ramp)."""
    measured = [r for r in records if not r.warmup and r.sent_ns]
    ends = [r.end_ns for r in measured if r.end_ns is not None]
    if not measured or not ends:
        return _empty("no request was sent and completed")
    sends = sorted(r.sent_ns for r in measured)
    first_send, last_send, last_end = sends[0], sends[-1], max(ends)
    wall_s = (last_end - first_send) / NS_PER_S
    span_s = (last_send - first_send) / NS_PER_S
    if concurrency is not None and len(sends) < concurrency:
        reason = f"{len(sends)} requests for {concurrency} users: the concurrency was never reached"
        return _empty(reason, wall_s, span_s, len(sends))
    load_reached = sends[concurrency - 1] if concurrency else first_send
    done = sorted(ends)
    first_wave = done[min(concurrency or 1, len(done)) - 1]  # closed loop: every user's first completion
    start = max(load_reached, first_wave)
    if math.isinf(ramp_s):
        return _empty(
            "the whole run was a ramp (--ramp-up-strategy over every request, as vLLM does): no steady "
            "load; give --ramp-up DURATION to hold the end rate after the ramp",
            wall_s,
            span_s,
            len(sends),
        )
    start = max(start, first_send + int(ramp_s * NS_PER_S))
    end = last_send
    if end <= start:
        return _empty(
            "no steady window: the last request was sent before the load was reached and the first "
            "request completed",
            wall_s,
            span_s,
            len(sends),
        )
    return _measure(measured, start, end, wall_s, span_s, last_end, first_send, len(sends), concurrency)


def _overlap_s(records: list[RequestRecord], start: int, end: int) -> float:
    """Request-seconds spent in flight inside [start, end]."""
    return (
        sum(max(0, min(r.end_ns, end) - max(r.sent_ns, start)) for r in records if r.end_ns is not None)
        / NS_PER_S
    )


def _measure(
    measured: list[RequestRecord],
    start: int,
    end: int,
    wall_s: float,
    span_s: float,
    last_end: int,
    first_send: int,
    sends: int,
    concurrency: int | None,
) -> SteadyState:
    # the successful requests as (sent, end, output tokens)
    ok = [
        (r.sent_ns, r.end_ns, r.output_tokens)
        for r in measured
        if r.status is Status.OK and r.end_ns is not None
    ]
    completed = [o for o in ok if start < o[1] <= end]
    window_s = (end - start) / NS_PER_S
    in_flight = _overlap_s(measured, start, end) / window_s
    if concurrency is not None:  # Little: X = L / W over the requests in flight in the window
        basis = [o for o in ok if o[0] <= end and o[1] > start]
        estimator = "in_flight/latency"
    else:
        basis, estimator = completed, "completions/window"
    w = sum(e - s for s, e, _ in basis) / len(basis) / NS_PER_S if basis else None
    if concurrency is not None:
        held = sum(max(0, min(e, end) - max(s, start)) for s, e, _ in ok) / NS_PER_S
        rps = held / window_s / w if w else 0.0
    else:
        rps = len(completed) / window_s
    tokens = sum(t for _, _, t in basis) / len(basis) * rps if basis else 0.0
    reasons = []
    if window_s < MIN_STEADY_FRACTION * wall_s:
        share = window_s / wall_s
        reasons.append(f"steady window {window_s:.2f} s is {share:.0%} of the {wall_s:.2f} s step")
    if len(completed) < MIN_STEADY_COMPLETIONS:
        reasons.append(
            f"{len(completed)} completions in the steady window (fewer than {MIN_STEADY_COMPLETIONS})"
        )
    return SteadyState(
        wall_s=wall_s,
        ramp_s=(start - first_send) / NS_PER_S,
        drain_s=(last_end - end) / NS_PER_S,
        window_s=window_s,
        send_span_s=span_s,
        completions=len(completed),
        request_throughput=rps,
        output_token_throughput=tokens,
        short=bool(reasons),
        reason="; ".join(reasons),
        sends=sends,
        mean_latency_s=w,
        in_flight=in_flight,
        estimator=estimator,
    )


def lengthen_factor(s: SteadyState) -> int:
    """How many times more requests a short run needs for a steady window of ``TARGET_STEADY_FRACTION``
    of its wall time and enough completions, assuming ramp-up and drain stay as long as they were and
    the send span grows with the request count (2 to ``MAX_LENGTHEN_FACTOR``)."""
    factor = 2.0
    if s.send_span_s > 0:
        t = TARGET_STEADY_FRACTION
        # steady' = k*span - ramp and wall' = k*span + drain; steady' >= t * wall'
        factor = max(factor, (s.ramp_s + t * s.drain_s) / ((1 - t) * s.send_span_s))
    else:
        factor = MAX_LENGTHEN_FACTOR
    if s.completions < MIN_STEADY_COMPLETIONS:
        factor = max(factor, 1.5 * MIN_STEADY_COMPLETIONS / max(s.completions, 1))
    return int(min(MAX_LENGTHEN_FACTOR, math.ceil(factor)))
