"""A run's summary kept as its records arrive, in a memory that does not grow with them. Pure.

``RunningSummary.add(batch)`` takes records as they are written; ``to_dict()`` gives what
``core.metrics.summarize(records, slo, with_ci=False).to_dict()`` gives over all of them, with the
same keys, so the store, ``runs show``, ``compare`` and ``history`` read it alike. Counts, rates,
throughputs, token totals, goodput, means, spreads, minima and maxima are exact; the percentiles
come from a log-bucketed sketch (``core.sketch``: within ``RELATIVE_ERROR``, 1 %, of the exact ones)
and have no intervals. The summary says so: ``percentiles_from`` is ``"sketch"`` and ``sketch``
holds the error. Error reasons are kept for ``MAX_ERROR_REASONS`` distinct texts, the rest counted
under ``OTHER_REASONS``. Memory: about 20 sketches of 11 KB each, whatever the run's length.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from itertools import chain
from typing import Any

import numpy as np

from tokenpace.core.metrics import (
    LATENCY_FIELDS,
    NS_PER_MS,
    NS_PER_S,
    Slo,
    Summary,
    e2e_ns,
    meets_slo,
    tpot_ns,
    ttft_ns,
)
from tokenpace.core.record import FAILURE_STATUSES, RequestRecord, Status
from tokenpace.core.sketch import MIN_VALUE, RELATIVE_ERROR, LogSketch
from tokenpace.core.token_accounting import TokenAccounting

MAX_ERROR_REASONS = 64  # distinct error texts kept by name; past it they are counted together
OTHER_REASONS = "(other reasons)"

_LATENCIES = LATENCY_FIELDS
_NETWORK = ("dns_ms", "tcp_ms", "tls_ms", "connect_ms", "upload_ms", "wait_headers_ms")


def sketch_note() -> dict[str, Any]:
    """What a sketch-based summary says about its percentiles (stored beside them)."""
    return {
        "relative_error": RELATIVE_ERROR,
        "zero_below_ms": MIN_VALUE,
        "why": "percentiles from a log-bucketed sketch, each within the relative error of the exact "
        "one (values below zero_below_ms count as 0); no intervals",
    }


class _Tokens:
    """``core.token_accounting`` summed as records arrive."""

    __slots__ = (
        "chunks",
        "compared",
        "max_diff",
        "mismatched",
        "prompt_n",
        "prompt_ratio",
        "server",
        "sources",
    )

    def __init__(self) -> None:
        self.sources: dict[str, int] = {}
        self.compared = self.mismatched = self.max_diff = self.server = self.chunks = self.prompt_n = 0
        self.prompt_ratio = 0.0

    def add(self, r: RequestRecord) -> None:
        src = r.output_tokens_source.value
        self.sources[src] = self.sources.get(src, 0) + 1
        if r.output_tokens_server is not None and r.output_tokens_counted and not r.usage_implausible:
            diff = abs(r.output_tokens_counted - r.output_tokens_server)
            self.compared += 1
            self.mismatched += diff > 0
            self.max_diff = max(self.max_diff, diff)
            self.server += r.output_tokens_server
            self.chunks += r.output_tokens_counted
        if r.prompt_tokens is not None and r.prompt_tokens_requested:
            self.prompt_n += 1
            self.prompt_ratio += r.prompt_tokens / r.prompt_tokens_requested

    def accounting(self) -> TokenAccounting:
        return TokenAccounting(
            output_sources=dict(self.sources),
            compared=self.compared,
            mismatched=self.mismatched,
            max_abs_diff=self.max_diff,
            tokens_per_chunk=self.server / self.chunks if self.chunks else None,
            prompt_compared=self.prompt_n,
            prompt_mean_ratio=self.prompt_ratio / self.prompt_n if self.prompt_n else None,
        )


def _itl_ms(ok: Sequence[RequestRecord]) -> np.ndarray:
    """Every gap between consecutive token timestamps of each record, in ms, in one numpy pass."""
    streams = [r.token_ns for r in ok if len(r.token_ns) > 1]
    if not streams:
        return np.empty(0)
    sizes = [len(s) for s in streams]
    flat = np.fromiter(chain.from_iterable(streams), dtype=np.int64, count=sum(sizes))
    gaps = np.diff(flat)
    ends = np.cumsum(sizes)[:-1] - 1  # a gap across two records: not a gap
    return np.delete(gaps, ends) / NS_PER_MS


class RunningSummary:
    """Feed it every batch of records once (``add``); read ``to_dict()`` at any time."""

    def __init__(self, slo: Slo | None = None, open_loop: bool = False) -> None:
        self.slo = slo or Slo()
        self.open_loop = open_loop
        self.sketches = {name: LogSketch() for name in (*_LATENCIES, "output_tokens", "prompt_tokens")}
        self.network = {name: LogSketch() for name in (*_NETWORK, "ttft_cold_ms", "ttft_warm_ms")}
        self.counts: dict[str, int] = {"sent": 0} | {s.value: 0 for s in Status} | {"not_sent": 0}
        self.errors: dict[str, int] = {}
        self.tokens = _Tokens()
        self.first_sent: int | None = None
        self.last_end: int | None = None
        self.out_tokens = self.prompt_tokens = 0
        self.good_from_send = self.good_from_scheduled = self.tpot_unjudged = 0
        self.reasoning = False
        self.new_connections = self.reused_connections = 0

    def add(self, batch: Iterable[RequestRecord]) -> None:
        values: dict[str, list[float]] = {name: [] for name in (*self.sketches, *self.network)}
        ok: list[RequestRecord] = []
        for r in batch:
            if r.warmup:
                continue
            if not r.sent_ns:
                self.counts["not_sent"] += 1
                continue
            self._count(r, values)
            self._network(r, values)
            if r.status is Status.OK:
                ok.append(r)
                self._ok(r, values)
        for name, sketch in (*self.sketches.items(), *self.network.items()):
            if name == "itl_ms":
                sketch.add_many(_itl_ms(ok))
            else:
                sketch.add_many(values[name])

    def _count(self, r: RequestRecord, values: dict[str, list[float]]) -> None:
        self.counts["sent"] += 1
        self.counts[r.status.value] += 1
        self.first_sent = r.sent_ns if self.first_sent is None else min(self.first_sent, r.sent_ns)
        if r.end_ns is not None:
            self.last_end = r.end_ns if self.last_end is None else max(self.last_end, r.end_ns)
        if r.status in FAILURE_STATUSES:
            key = f"{r.status.value}: {r.error or ''}".rstrip(": ")
            if key not in self.errors and len(self.errors) >= MAX_ERROR_REASONS:
                key = OTHER_REASONS
            self.errors[key] = self.errors.get(key, 0) + 1
        values["queue_ms"].append((r.sent_ns - r.scheduled_ns) / NS_PER_MS)
        if r.dispatched_ns:
            values["dispatch_lag_ms"].append((r.dispatched_ns - r.scheduled_ns) / NS_PER_MS)

    def _network(self, r: RequestRecord, values: dict[str, list[float]]) -> None:
        cold = r.connect_ns is not None
        if cold:
            self.new_connections += 1
            for name, ns in (("dns_ms", r.dns_ns), ("tcp_ms", r.tcp_ns), ("tls_ms", r.tls_ns)):
                if ns is not None:
                    values[name].append(ns / NS_PER_MS)
            values["connect_ms"].append((r.connect_ns or 0) / NS_PER_MS)
        else:
            self.reused_connections += 1
        if r.request_ns:
            values["upload_ms"].append((r.request_ns - r.sent_ns - (r.connect_ns or 0)) / NS_PER_MS)
            if r.headers_ns:
                values["wait_headers_ms"].append((r.headers_ns - r.request_ns) / NS_PER_MS)
        if r.status is Status.OK and r.first_token_ns is not None:
            values["ttft_cold_ms" if cold else "ttft_warm_ms"].append(
                (r.first_token_ns - r.sent_ns) / NS_PER_MS
            )

    def _ok(self, r: RequestRecord, values: dict[str, list[float]]) -> None:
        tpot = tpot_ns(r)
        for name, ns in (("ttft_ms", ttft_ns(r)), ("e2e_ms", e2e_ns(r)), ("tpot_ms", tpot)):
            if ns is not None:
                values[name].append(ns / NS_PER_MS)
        if r.first_answer_ns is not None:
            values["ttfat_ms"].append((r.first_answer_ns - r.sent_ns) / NS_PER_MS)
        if r.first_token_ns is not None:
            values["ttft_from_scheduled_ms"].append((r.first_token_ns - r.scheduled_ns) / NS_PER_MS)
        if r.end_ns is not None:
            values["e2e_from_scheduled_ms"].append((r.end_ns - r.scheduled_ns) / NS_PER_MS)
        self.reasoning = self.reasoning or bool(r.reasoning_chunks)
        prompt = r.prompt_tokens if r.prompt_tokens is not None else r.prompt_tokens_requested or 0
        values["output_tokens"].append(r.output_tokens)
        values["prompt_tokens"].append(prompt)
        self.out_tokens += r.output_tokens
        self.prompt_tokens += prompt
        self.tokens.add(r)
        if self.slo.is_empty():
            return
        if self.slo.tpot_ms is not None and r.output_tokens > 1 and tpot is None:
            self.tpot_unjudged += 1
        self.good_from_send += meets_slo(r, self.slo)
        if self.open_loop:
            self.good_from_scheduled += meets_slo(r, self.slo, from_scheduled=True)

    def to_dict(self) -> dict[str, Any]:
        """The summary over every record added so far (``Summary.to_dict``'s keys)."""
        return self._summary().to_dict()

    def _summary(self) -> Summary:
        sent, ok = self.counts["sent"], self.counts[Status.OK.value]
        window_s = self._window_ns() / NS_PER_S

        def per_s(x: float) -> float:
            return x / window_s if window_s > 0 else 0.0

        dists = {name: sketch.distribution() for name, sketch in self.sketches.items()}
        if not self.reasoning:  # as summarize: TTFAT only for runs where reasoning came first
            dists["ttfat_ms"] = LogSketch().distribution()
        tpot_p50 = dists["tpot_ms"].p50
        failures = sum(self.counts[s.value] for s in FAILURE_STATUSES)
        return Summary(
            ttft_ms=dists["ttft_ms"],
            tpot_ms=dists["tpot_ms"],
            itl_ms=dists["itl_ms"],
            e2e_ms=dists["e2e_ms"],
            ttfat_ms=dists["ttfat_ms"],
            ttft_from_scheduled_ms=dists["ttft_from_scheduled_ms"],
            e2e_from_scheduled_ms=dists["e2e_from_scheduled_ms"],
            queue_ms=dists["queue_ms"],
            dispatch_lag_ms=dists["dispatch_lag_ms"],
            output_tokens=dists["output_tokens"],
            prompt_tokens=dists["prompt_tokens"],
            window_s=window_s,
            request_throughput=per_s(ok),
            output_token_throughput=per_s(self.out_tokens),
            total_token_throughput=per_s(self.out_tokens + self.prompt_tokens),
            per_user_output_token_throughput=1000.0 / tpot_p50 if tpot_p50 else None,
            slo=self.slo.to_dict(),
            error_rate=failures / sent if sent else 0.0,
            timeout_rate=self.counts[Status.TIMEOUT.value] / sent if sent else 0.0,
            interrupted_rate=self.counts[Status.STREAM_INTERRUPTED.value] / sent if sent else 0.0,
            counts=dict(self.counts),
            errors=dict(sorted(self.errors.items(), key=lambda kv: -kv[1])),
            tokens=self.tokens.accounting(),
            reasoning=self.reasoning,
            extra={"network": self._network_dict(), "percentiles_from": "sketch", "sketch": sketch_note()},
            **self._goodput(sent, ok, window_s),
        )

    def _window_ns(self) -> int:
        if self.first_sent is None or self.last_end is None:
            return 0
        return max(0, self.last_end - self.first_sent)

    def _goodput(self, sent: int, ok: int, window_s: float) -> dict[str, Any]:
        out: dict[str, Any] = {"goodput_latency_from": "scheduled" if self.open_loop else "send"}
        names = ("goodput", "goodput_ratio", "goodput_from_send", "goodput_ratio_from_send")
        if self.slo.is_empty():
            return out | dict.fromkeys(names)
        if self.tpot_unjudged:
            why = (
                f"a TPOT SLO needs streamed responses: {self.tpot_unjudged} of {ok} ok responses came "
                "whole (one chunk), so their time per token is unknown; measure with streaming, or drop "
                "the TPOT line"
            )
            return out | dict.fromkeys(names) | {"goodput_unjudged": why}
        good = self.good_from_scheduled if self.open_loop else self.good_from_send
        return out | {
            "goodput": good / window_s if window_s > 0 else 0.0,
            "goodput_ratio": good / sent if sent else None,
            "goodput_from_send": self.good_from_send / window_s if window_s > 0 else 0.0,
            "goodput_ratio_from_send": self.good_from_send / sent if sent else None,
        }

    def _network_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "new_connections": self.new_connections,
            "reused_connections": self.reused_connections,
        }
        for name, sketch in self.network.items():
            out[name] = sketch.distribution().to_dict()
        return out


def is_sketch(summary: dict[str, Any]) -> bool:
    """Whether a stored summary's percentiles come from a sketch (not from every record)."""
    return summary.get("percentiles_from") == "sketch"


def sketch_error(summary: dict[str, Any]) -> float:
    """The relative error a stored summary's percentiles may carry (0 when exact)."""
    note = summary.get("sketch") if is_sketch(summary) else None
    err = note.get("relative_error") if isinstance(note, dict) else None
    return float(err) if isinstance(err, (int, float)) and math.isfinite(err) else 0.0
