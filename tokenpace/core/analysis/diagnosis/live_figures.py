"""A run's figures so far, while it goes: folded from batches of ended records, read as a snapshot.
Pure (the caller brings the elapsed time and what it knows of the client).

Headline percentiles (TTFT, TPOT, E2E P50/P95) are over every measured record so far, from the
log-bucketed sketch of ``core.sketch`` (within ``RELATIVE_ERROR``, 1 %, no interval: these are
figures to watch, the stored run's summary is the result). Each fold also adds one point to a
series (the records of that interval only: its TTFT P50/P95, output tokens/s, requests and errors),
kept to ``MAX_POINTS`` by dropping every other point when full, so it spans the whole run.
Memory: four sketches of about 11 KB and the series, whatever the run's length.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from tokenpace.core.metrics import NS_PER_MS, e2e_ns, tpot_ns, ttft_ns
from tokenpace.core.record import RequestRecord, Status
from tokenpace.core.sketch import LogSketch

MAX_POINTS = 600  # the series' points; past it every other one is dropped
LATENCIES = ("ttft_ms", "tpot_ms", "e2e_ms")


@dataclass(frozen=True, slots=True)
class ClientNow:
    """What the client knows of itself at a fold: requests in flight (None: not known, e.g. with
    worker processes) and how late the fold's own timer woke (the event loop's lag)."""

    in_flight: int | None = None
    loop_lag_ms: float | None = None


@dataclass(slots=True)
class LiveSnapshot:
    """The figures so far (``to_dict`` is what the store keeps and the console reads)."""

    elapsed_s: float
    done: int  # measured requests ended (warm-up apart)
    ok: int
    failed: int
    warmup: int
    errors: dict[str, int]  # failed requests by status
    p50: dict[str, float | None]  # per latency: ttft_ms, tpot_ms, e2e_ms
    p95: dict[str, float | None]
    output_tokens_per_s: float  # from the first request sent to the fold
    recent_tokens_per_s: float  # over the last interval
    in_flight: int | None
    client: dict[str, float | None]  # dispatch_lag_p95_ms, loop_lag_ms
    series: list[dict[str, Any]] = field(default_factory=list)

    @property
    def error_rate(self) -> float:
        return self.failed / self.done if self.done else 0.0

    def to_dict(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in self.__slots__}
        out["error_rate"] = self.error_rate
        out["series"] = [dict(p) for p in self.series]
        return out


def _pair(sketch: LogSketch) -> tuple[float | None, float | None]:
    if sketch.n == 0:
        return None, None
    p50, p95 = sketch.percentiles((50, 95))
    return p50, p95


class LiveFigures:
    """Feed each batch of ended records once (``fold``), which returns the snapshot after it."""

    def __init__(self) -> None:
        self.sketches = {name: LogSketch() for name in (*LATENCIES, "dispatch_lag_ms")}
        self.ok = self.failed = self.warmup = 0
        self.errors: dict[str, int] = {}
        self.output_tokens = 0
        self.series: list[dict[str, Any]] = []
        self.last_elapsed_s = 0.0
        self.first_sent_ns: int | None = None

    def fold(
        self, batch: Iterable[RequestRecord], elapsed_s: float, client: ClientNow, now_ns: int | None = None
    ) -> LiveSnapshot:
        """``elapsed_s``: since the run started (the series' time); ``now_ns``: the records' clock
        now (perf_counter_ns), for tokens/s since the first send (None: over ``elapsed_s``)."""
        values: dict[str, list[float]] = {name: [] for name in self.sketches}
        ok = failed = tokens = 0
        for r in batch:
            if r.warmup:
                self.warmup += 1
                continue
            if r.sent_ns and (self.first_sent_ns is None or r.sent_ns < self.first_sent_ns):
                self.first_sent_ns = r.sent_ns
            if r.dispatched_ns and r.scheduled_ns:
                values["dispatch_lag_ms"].append((r.dispatched_ns - r.scheduled_ns) / NS_PER_MS)
            if r.status is not Status.OK:
                failed += 1
                self.errors[r.status.value] = self.errors.get(r.status.value, 0) + 1
                continue
            ok += 1
            tokens += r.output_tokens
            for name, ns in (("ttft_ms", ttft_ns(r)), ("tpot_ms", tpot_ns(r)), ("e2e_ms", e2e_ns(r))):
                if ns is not None:
                    values[name].append(ns / NS_PER_MS)
        interval = LogSketch()
        interval.add_many(values["ttft_ms"])
        for name, sketch in self.sketches.items():
            sketch.add_many(values[name])
        self.ok += ok
        self.failed += failed
        self.output_tokens += tokens
        span = max(elapsed_s - self.last_elapsed_s, 1e-9)
        self.last_elapsed_s = elapsed_s
        recent = tokens / span
        self._point(elapsed_s, interval, recent, ok + failed, failed)
        span_s = elapsed_s
        if now_ns is not None and self.first_sent_ns is not None:
            span_s = (now_ns - self.first_sent_ns) / (NS_PER_MS * 1000)
        return self._snapshot(elapsed_s, span_s, recent, client)

    def _point(self, t: float, ttft: LogSketch, tok_s: float, done: int, failed: int) -> None:
        p50, p95 = _pair(ttft)
        point = {"t": t, "ttft_p50": p50, "ttft_p95": p95, "tok_s": tok_s, "done": done, "failed": failed}
        self.series.append(point)
        if len(self.series) >= MAX_POINTS:
            del self.series[::2]

    def _snapshot(self, elapsed_s: float, span_s: float, recent: float, client: ClientNow) -> LiveSnapshot:
        pairs = {name: _pair(self.sketches[name]) for name in LATENCIES}
        lag = _pair(self.sketches["dispatch_lag_ms"])[1]
        return LiveSnapshot(
            elapsed_s=elapsed_s,
            done=self.ok + self.failed,
            ok=self.ok,
            failed=self.failed,
            warmup=self.warmup,
            errors=dict(self.errors),
            p50={name: p[0] for name, p in pairs.items()},
            p95={name: p[1] for name, p in pairs.items()},
            output_tokens_per_s=self.output_tokens / span_s if span_s > 0 else 0.0,
            recent_tokens_per_s=recent,
            in_flight=client.in_flight,
            client={"dispatch_lag_p95_ms": lag, "loop_lag_ms": client.loop_lag_ms},
            series=list(self.series),
        )
