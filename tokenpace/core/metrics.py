"""Records in, numbers out: the metric definitions of tokenpace. Pure: no I/O, no clock.

Definitions (also exported in every JSON result, see DEFINITIONS):
- TTFT = first_token - sent, where the first token is the first chunk carrying generated output of
  any channel (answer text, reasoning text, tool call); role-only or empty chunks do not count.
- TTFAT (time to first answer token) = first_answer - sent, for runs where reasoning came first.
- E2E = end - sent (the end of the stream).  TPOT = (last token-carrying chunk - first token) /
  (output_tokens - 1), only for output_tokens > 1 and a streamed response (two or more token-carrying
  chunks): the wait between the last token and the end of the stream is E2E's, not TPOT's (as in
  ``vllm bench serve``). A response that came whole has no TPOT, so a TPOT SLO cannot judge it.
- ITL = each gap between consecutive token-carrying chunks (a chunk may carry several tokens).
- Latency distributions use successful (status ok), non-warm-up requests only.
- Window = first send to last completion of the non-warm-up requests; throughputs divide by it.
- Goodput = ok requests meeting every SLO given, per second of window; in an open loop TTFT and E2E
  count from the scheduled time (goodput_from_send: from the send time, as in a closed loop).
- Error, timeout and interruption rates divide by all non-warm-up requests sent.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from tokenpace.core import steady
from tokenpace.core.network import network_phases
from tokenpace.core.record import FAILURE_STATUSES, RequestRecord, Status
from tokenpace.core.stats import Distribution, describe
from tokenpace.core.token_accounting import TokenAccounting, token_accounting

NS_PER_MS = 1_000_000
NS_PER_S = 1_000_000_000

DEFINITIONS = {
    "ttft_ms": "first chunk carrying generated output (text, reasoning or tool call) minus send time; "
    "role-only and empty chunks do not count",
    "ttfat_ms": "first chunk carrying answer text or a tool call (not reasoning) minus send time",
    "tpot_ms": "(last token-carrying chunk - first token) / (output_tokens - 1), streamed requests with "
    "more than one output token; the wait after the last token for the end of the stream is not in it",
    "itl_ms": "every gap between consecutive token-carrying chunks; a chunk may carry several tokens",
    "e2e_ms": "end of stream minus send time",
    "ttft_from_scheduled_ms": "first token minus the time the schedule wanted the request sent "
    "(includes client queueing: the latency a user arriving on schedule would see)",
    "e2e_from_scheduled_ms": "end of stream minus scheduled time",
    "queue_ms": "send time minus scheduled time (waiting for the concurrency cap or a late client)",
    "dispatch_lag_ms": "when the client released a request minus when the schedule wanted it: "
    "the client's own lateness",
    "window_s": "first send to last completion of measured (non-warm-up) requests",
    "request_throughput": "ok requests per second of window",
    "output_token_throughput": "output tokens of ok requests per second of window",
    "total_token_throughput": "prompt + output tokens of ok requests per second of window",
    "goodput": "ok requests meeting every SLO per second of window (a TPOT SLO is met by "
    "single-token requests, which have no TPOT; with a TPOT SLO and responses that came whole, not "
    "streamed, goodput is not given: see goodput_unjudged); in an open loop TTFT and E2E count from "
    "the scheduled time (what a user arriving on schedule felt), in a closed loop from the send",
    "goodput_unjudged": "why goodput is not given although SLOs were: a TPOT SLO over responses "
    "that came whole (not streamed), whose time per token nobody measured",
    "goodput_from_send": "goodput with TTFT and E2E from the send time (equal to goodput in a closed loop)",
    "not_sent": "requests scheduled but never sent (still queued for the concurrency cap at the end "
    "of --duration, or at Ctrl-C): recorded, counted apart, in no rate",
    "error_rate": "requests that failed (http_error, timeout, connect_error, stream_interrupted, "
    "protocol_error) over requests sent; cancelled requests are counted but are not errors",
    "timeout_rate": "timeouts over requests sent",
    "interrupted_rate": "stream interruptions over requests sent",
    "percentiles": "linear interpolation (numpy default); ci95: the distribution-free "
    "order-statistic interval (the ranks that bracket the percentile with 95% confidence, from the "
    "binomial distribution; exact up to 2,000 samples, its normal approximation beyond), taken at "
    "the effective sample size n_eff where requests sent close in time moved together (n_eff, per "
    "percentile, shown only where below n); low_sample lists percentiles with fewer than 5 "
    "samples beyond them",
    "output_tokens": "server usage when reported, else one token per token-carrying chunk",
    "steady": steady.DEFINITION,
}


# The summary's latency distributions, in the order its dict lists them (the running summary's too).
LATENCY_FIELDS = (
    "ttft_ms",
    "tpot_ms",
    "itl_ms",
    "e2e_ms",
    "ttfat_ms",
    "ttft_from_scheduled_ms",
    "e2e_from_scheduled_ms",
    "queue_ms",
    "dispatch_lag_ms",
)


@dataclass(frozen=True, slots=True)
class Slo:
    """Per-request service-level objectives in milliseconds; None means not constrained."""

    ttft_ms: float | None = None
    tpot_ms: float | None = None
    e2e_ms: float | None = None

    def is_empty(self) -> bool:
        return self.ttft_ms is None and self.tpot_ms is None and self.e2e_ms is None

    def to_dict(self) -> dict[str, float]:
        return {
            k: v
            for k, v in (("ttft_ms", self.ttft_ms), ("tpot_ms", self.tpot_ms), ("e2e_ms", self.e2e_ms))
            if v is not None
        }


# --- per-request metrics --------------------------------------------------------------------


def ttft_ns(r: RequestRecord) -> int | None:
    return None if r.first_token_ns is None else r.first_token_ns - r.sent_ns


def e2e_ns(r: RequestRecord) -> int | None:
    return None if r.end_ns is None else r.end_ns - r.sent_ns


def tpot_ns(r: RequestRecord) -> float | None:
    """Time per output token after the first, to the last token-carrying chunk (the end of the
    stream may come later: that wait is E2E's). None for fewer than two tokens, and for a response
    that came in one chunk (not streamed: every token arrived at once, so there is nothing to time)."""
    out = r.output_tokens
    if out <= 1 or r.first_token_ns is None or len(r.token_ns) == 1:
        return None
    # No chunk times kept (a virtual engine's record): its end is its last token.
    last = r.token_ns[-1] if r.token_ns else r.end_ns
    return (last - r.first_token_ns) / (out - 1) if last is not None and last > r.first_token_ns else None


def tpot_unjudged(records: Iterable[RequestRecord]) -> int:
    """Ok requests a TPOT SLO cannot judge: more than one output token, but no TPOT (came whole)."""
    return sum(1 for r in records if r.status is Status.OK and r.output_tokens > 1 and tpot_ns(r) is None)


def itl_gaps_ns(r: RequestRecord) -> list[int]:
    t = r.token_ns
    return [b - a for a, b in pairwise(t)]


def meets_slo(r: RequestRecord, slo: Slo, from_scheduled: bool = False) -> bool:
    """Whether an ok request met every SLO; with ``from_scheduled``, TTFT and E2E count from the time
    the schedule wanted it sent (open loop: what a user arriving on schedule felt), not from the send."""
    if r.status is not Status.OK:
        return False
    shift = (r.sent_ns - r.scheduled_ns) if from_scheduled and r.scheduled_ns else 0
    if slo.ttft_ms is not None:
        t = ttft_ns(r)
        if t is None or t + shift > slo.ttft_ms * NS_PER_MS:
            return False
    if slo.tpot_ms is not None:
        tpot = tpot_ns(r)
        if tpot is not None and tpot > slo.tpot_ms * NS_PER_MS:
            return False
    if slo.e2e_ms is not None:
        t = e2e_ns(r)
        if t is None or t + shift > slo.e2e_ms * NS_PER_MS:
            return False
    return True


# --- run summary ------------------------------------------------------------------------------


@dataclass(slots=True)
class Summary:
    ttft_ms: Distribution
    tpot_ms: Distribution
    itl_ms: Distribution
    e2e_ms: Distribution
    ttfat_ms: Distribution
    ttft_from_scheduled_ms: Distribution
    e2e_from_scheduled_ms: Distribution
    queue_ms: Distribution
    dispatch_lag_ms: Distribution
    output_tokens: Distribution
    prompt_tokens: Distribution
    window_s: float
    request_throughput: float
    output_token_throughput: float
    total_token_throughput: float
    per_user_output_token_throughput: float | None  # 1 / median TPOT
    goodput: float | None
    goodput_ratio: float | None
    slo: dict[str, float]
    error_rate: float
    timeout_rate: float
    interrupted_rate: float
    counts: dict[str, int]
    errors: dict[str, int]  # short reason -> count, most common first
    tokens: TokenAccounting
    reasoning: bool  # some request streamed reasoning before its answer
    extra: dict[str, Any] = field(default_factory=dict)
    goodput_from_send: float | None = None  # the same SLOs with latency from the send time
    goodput_ratio_from_send: float | None = None
    goodput_latency_from: str = "send"  # what goodput counts latency from: send | scheduled
    goodput_unjudged: str | None = None  # why goodput is not given although an SLO was (TPOT, no stream)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name in (*LATENCY_FIELDS, "output_tokens", "prompt_tokens"):
            out[name] = getattr(self, name).to_dict()
        for name in (
            "window_s",
            "request_throughput",
            "output_token_throughput",
            "total_token_throughput",
            "per_user_output_token_throughput",
            "goodput",
            "goodput_ratio",
            "goodput_from_send",
            "goodput_ratio_from_send",
            "goodput_latency_from",
            "goodput_unjudged",
            "slo",
            "error_rate",
            "timeout_rate",
            "interrupted_rate",
            "counts",
            "errors",
            "reasoning",
        ):
            out[name] = getattr(self, name)
        out["tokens"] = self.tokens.to_dict()
        out.update(self.extra)
        return out


def _ms(values: Iterable[float]) -> list[float]:
    return [v / NS_PER_MS for v in values]


def _error_reasons(records: Sequence[RequestRecord]) -> dict[str, int]:
    reasons: dict[str, int] = {}
    for r in records:
        if r.status in FAILURE_STATUSES:
            key = f"{r.status.value}: {r.error or ''}".rstrip(": ")
            reasons[key] = reasons.get(key, 0) + 1
    return dict(sorted(reasons.items(), key=lambda kv: -kv[1]))


def window_ns(records: Sequence[RequestRecord]) -> int:
    starts = [r.sent_ns for r in records if r.sent_ns]
    ends = [r.end_ns for r in records if r.end_ns is not None and r.sent_ns]
    if not starts or not ends:
        return 0
    return max(0, max(ends) - min(starts))


def _goodput(
    ok: Sequence[RequestRecord], slo: Slo, sent: int, window_s: float, open_loop: bool
) -> dict[str, Any]:
    """Goodput and its share, and the same counted from the send: an open loop's goodput counts TTFT
    and E2E from the scheduled time (what a user arriving on schedule felt). None without an SLO."""
    out: dict[str, Any] = {"goodput_latency_from": "scheduled" if open_loop else "send"}
    names = ("goodput", "goodput_ratio", "goodput_from_send", "goodput_ratio_from_send")
    if slo.is_empty():
        return out | dict.fromkeys(names)
    unjudged = tpot_unjudged(ok) if slo.tpot_ms is not None else 0
    if unjudged:  # counting them as met would report 100 % goodput for a decode nobody timed
        return (
            out
            | dict.fromkeys(names)
            | {
                "goodput_unjudged": f"a TPOT SLO needs streamed responses: {unjudged} of {len(ok)} ok "
                "responses came whole (one chunk), so their time per token is unknown; measure with "
                "streaming, or drop the TPOT line"
            }
        )
    from_send = sum(1 for r in ok if meets_slo(r, slo))
    good = sum(1 for r in ok if meets_slo(r, slo, from_scheduled=True)) if open_loop else from_send
    return out | {
        "goodput": good / window_s if window_s > 0 else 0.0,
        "goodput_ratio": good / sent if sent else None,
        "goodput_from_send": from_send / window_s if window_s > 0 else 0.0,
        "goodput_ratio_from_send": from_send / sent if sent else None,
    }


def summarize(
    records: Iterable[RequestRecord], slo: Slo | None = None, with_ci: bool = True, open_loop: bool = False
) -> Summary:
    """Summarise a run's records. Warm-up records are excluded from every number. In an open loop
    (``open_loop``), goodput counts TTFT and E2E from the scheduled time; ``goodput_from_send`` from
    the send, as a closed loop does."""
    scheduled = [r for r in records if not r.warmup]
    measured = [r for r in scheduled if r.sent_ns]  # a request never sent is counted apart
    # in send order: the intervals count requests sent close in time that moved together
    measured = sorted(measured, key=lambda r: r.sent_ns)
    ok = [r for r in measured if r.status is Status.OK]
    sent = len(measured)

    counts = {"sent": sent} | {s.value: 0 for s in Status}
    for r in measured:
        counts[r.status.value] += 1
    counts["not_sent"] = len(scheduled) - sent

    ttfts = [t for r in ok if (t := ttft_ns(r)) is not None]
    e2es = [t for r in ok if (t := e2e_ns(r)) is not None]
    tpots = [tp for r in ok if (tp := tpot_ns(r)) is not None]
    itls: list[int] = []
    for r in ok:
        itls.extend(itl_gaps_ns(r))
    reasoning = any(r.reasoning_chunks for r in ok)
    ttfats = [r.first_answer_ns - r.sent_ns for r in ok if r.first_answer_ns is not None] if reasoning else []
    started = [r for r in measured if r.sent_ns]
    ttft_sched = [r.first_token_ns - r.scheduled_ns for r in ok if r.first_token_ns is not None]
    e2e_sched = [r.end_ns - r.scheduled_ns for r in ok if r.end_ns is not None]
    queue = [r.sent_ns - r.scheduled_ns for r in started]
    lag = [r.dispatched_ns - r.scheduled_ns for r in started if r.dispatched_ns]

    window = window_ns(measured)
    window_s = window / NS_PER_S
    out_tokens = sum(r.output_tokens for r in ok)
    prompt_tokens = sum(
        (r.prompt_tokens if r.prompt_tokens is not None else r.prompt_tokens_requested or 0) for r in ok
    )

    def per_s(x: float) -> float:
        return x / window_s if window_s > 0 else 0.0

    slo = slo or Slo()

    def d(values: Iterable[float]) -> Distribution:
        return describe(_ms(values), with_ci=with_ci, ordered=True)

    tpot_dist = d(tpots)
    failures = counts
    return Summary(
        ttft_ms=d(ttfts),
        tpot_ms=tpot_dist,
        itl_ms=d(itls),
        e2e_ms=d(e2es),
        ttfat_ms=d(ttfats),
        ttft_from_scheduled_ms=d(ttft_sched),
        e2e_from_scheduled_ms=d(e2e_sched),
        queue_ms=d(queue),
        dispatch_lag_ms=d(lag),
        output_tokens=describe([r.output_tokens for r in ok], with_ci=False),
        prompt_tokens=describe(
            [r.prompt_tokens if r.prompt_tokens is not None else r.prompt_tokens_requested or 0 for r in ok],
            with_ci=False,
        ),
        window_s=window_s,
        request_throughput=per_s(len(ok)),
        output_token_throughput=per_s(out_tokens),
        total_token_throughput=per_s(out_tokens + prompt_tokens),
        per_user_output_token_throughput=(1000.0 / tpot_dist.p50 if tpot_dist.p50 else None),
        slo=slo.to_dict(),
        error_rate=(sum(failures[s.value] for s in FAILURE_STATUSES) / sent) if sent else 0.0,
        timeout_rate=failures[Status.TIMEOUT.value] / sent if sent else 0.0,
        interrupted_rate=failures[Status.STREAM_INTERRUPTED.value] / sent if sent else 0.0,
        counts=counts,
        errors=_error_reasons(measured),
        tokens=token_accounting(ok),
        reasoning=reasoning,
        extra={"network": network_phases(measured)},
        **_goodput(ok, slo, sent, window_s, open_loop),
    )
