"""The client checks itself: event-loop lag, CPU and memory while it measures.

A load tester that silently falls behind reports its own lag as the server's latency, or sends a
lower load than it claims. These numbers decide whether a run is valid for the load asked.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import resource
import sys
import time
from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tokenpace.core.analysis.diagnosis.client_stalls import StallImpact, Stalls, stall_impact
from tokenpace.core.analysis.evidence.gate_noise import host_class
from tokenpace.core.analysis.evidence.rates import exact_lower
from tokenpace.core.record import RequestRecord

# Limits beyond which the client's own delays distort what it measures.
LOOP_LAG_P99_LIMIT_MS = 5.0
DISPATCH_LAG_P99_LIMIT_MS = 5.0
# "P99 under the limit" is a claim that at most 1 % of requests went out later than it; the run
# breaks it only where the late share's 95 % lower bound is past 1 % (over a short open-loop step the
# sample P99 is its single latest request, which one descheduling of the process decides).
DISPATCH_LATE_SHARE = 0.01
CPU_LIMIT = 0.90  # share of one core: beyond it the event loop queues work
# A stall: the loop did not run at all (a GC pause, the process descheduled or stopped). Timer
# granularity makes a sleep wake up to ~1 ms late, so only lateness beyond this counts.
STALL_THRESHOLD_MS = 3.0
STALL_SHARE_WARNING = 0.01  # of the run's wall time
# Where each stall was is kept to judge which requests it held (core/analysis/diagnosis/
# client_stalls.py): two 8-byte ints a stall, at most this many (16 MB; 5.5 h of a loop stalled at
# every probe); past it they are counted, and a run that lost track of its stalls is NOT VALID.
MAX_STALLS_KEPT = 1_000_000


def read_host_load() -> float | None:
    """The host's 1-minute load average per core (None where the platform has none)."""
    try:
        return os.getloadavg()[0] / (os.cpu_count() or 1)
    except OSError:
        return None


@dataclass
class HealthReport:
    loop_lag_p50_ms: float | None
    loop_lag_p99_ms: float | None
    loop_lag_max_ms: float | None
    cpu_fraction: float  # process CPU time / wall time (1.0 = one full core)
    cpu_us_per_chunk: float | None  # process CPU per token-carrying chunk received
    max_rss_mb: float
    longest_stall_ms: float = 0.0
    stall_share: float = 0.0  # share of the run the loop was stalled
    dispatch_lag_p50_ms: float | None = None
    dispatch_lag_p99_ms: float | None = None
    stall_starts: array[int] = field(default_factory=lambda: array("q"))  # ns, this process's clock
    stall_ends: array[int] = field(default_factory=lambda: array("q"))
    stalls_dropped: int = 0  # past MAX_STALLS_KEPT
    stall_impact: StallImpact | None = None  # set once the stalls are judged against the records
    host_load_per_core: float | None = None  # the larger 1-minute load average per core, start or end
    invalid_reasons: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def valid(self) -> bool:
        return not self.invalid_reasons

    @property
    def host(self) -> str | None:
        """The host's condition over the run (``gate_noise.host_class``): busy or quiet."""
        return host_class(self.host_load_per_core, self.stall_share)

    def to_dict(self) -> dict[str, Any]:
        return {
            "valid": self.valid,
            "invalid_reasons": self.invalid_reasons,
            "loop_lag_ms": {
                "p50": self.loop_lag_p50_ms,
                "p99": self.loop_lag_p99_ms,
                "max": self.loop_lag_max_ms,
            },
            "dispatch_lag_ms": {"p50": self.dispatch_lag_p50_ms, "p99": self.dispatch_lag_p99_ms},
            "stalls": {
                "longest_ms": self.longest_stall_ms,
                "share": self.stall_share,
                "count": len(self.stall_starts) + self.stalls_dropped,
                **({"impact": self.stall_impact.to_dict()} if self.stall_impact is not None else {}),
            },
            "host": {"load_per_core": self.host_load_per_core, "class": self.host},
            "cpu_fraction": self.cpu_fraction,
            "cpu_us_per_chunk": self.cpu_us_per_chunk,
            "max_rss_mb": self.max_rss_mb,
            "limits": {
                "loop_lag_p99_ms": LOOP_LAG_P99_LIMIT_MS,
                "dispatch_lag_p99_ms": DISPATCH_LAG_P99_LIMIT_MS,
                "stall_tolerance": self.stall_impact.tolerance if self.stall_impact is not None else None,
                "cpu_fraction": CPU_LIMIT,
            },
        }


class HealthMonitor:
    """Samples event-loop lag every ``interval_s`` and CPU time over the run."""

    def __init__(self, interval_s: float = 0.02) -> None:  # 50 probes/s: ~0.3% of a core
        self.interval_s = interval_s
        self.lags_ms: list[float] = []
        self.stalls_ms: list[float] = []
        self.stall_starts, self.stall_ends = array("q"), array("q")  # perf_counter_ns, MAX_STALLS_KEPT
        self.stalls_dropped = 0
        self._task: asyncio.Task[Any] | None = None
        self._cpu0 = self._wall0 = 0.0
        self._cpu = self._wall = 0.0
        self._loads: list[float] = []

    def _read_load(self) -> None:
        # looked up at call time, so a benchmark can stand in for the host's reading
        load = read_host_load()
        if load is not None:
            self._loads.append(load)

    def start(self) -> None:
        self._read_load()
        self._cpu0, self._wall0 = time.process_time(), time.perf_counter()
        self._task = asyncio.get_running_loop().create_task(self._sample())

    async def stop(self) -> None:
        self._cpu = time.process_time() - self._cpu0
        self._wall = time.perf_counter() - self._wall0
        self._read_load()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _sample(self) -> None:
        # The probe asks to run "as soon as possible" and measures how long that took: the time a
        # callback waits behind the loop's other work, which is how late data_received (and so
        # every timestamp) can be. Sleep overshoot would mostly measure timer granularity instead.
        loop = asyncio.get_running_loop()
        lags = self.lags_ms

        def probe_ran(asked: int) -> None:
            lags.append((time.perf_counter_ns() - asked) / 1e6)

        # A frozen loop delays the wake-up itself, which the probe cannot see: measure that too.
        interval, stalls = self.interval_s, self.stalls_ms
        interval_ns = int(interval * 1e9)
        while True:
            slept = time.perf_counter_ns()
            await asyncio.sleep(interval)
            woke = time.perf_counter_ns()
            late_ms = (woke - slept - interval_ns) / 1e6
            if late_ms > STALL_THRESHOLD_MS:
                stalls.append(late_ms)
                self._place(slept + interval_ns, woke)
            loop.call_soon(probe_ran, woke)

    def _place(self, start_ns: int, end_ns: int) -> None:
        """The stall: from when the sampler should have woken to when it did."""
        if len(self.stall_starts) < MAX_STALLS_KEPT:
            self.stall_starts.append(start_ns)
            self.stall_ends.append(end_ns)
        else:
            self.stalls_dropped += 1

    def report(self, chunks: int, dispatch_lags_ms: list[float], open_loop: bool) -> HealthReport:
        lags = np.asarray(self.lags_ms) if self.lags_ms else None
        cpu_fraction = self._cpu / self._wall if self._wall > 0 else 0.0
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        rss_mb = rss / (1024 * 1024) if sys.platform == "darwin" else rss / 1024
        report = HealthReport(
            loop_lag_p50_ms=float(np.percentile(lags, 50)) if lags is not None else None,
            loop_lag_p99_ms=float(np.percentile(lags, 99)) if lags is not None else None,
            loop_lag_max_ms=float(lags.max()) if lags is not None else None,
            cpu_fraction=cpu_fraction,
            cpu_us_per_chunk=self._cpu * 1e6 / chunks if chunks else None,
            max_rss_mb=rss_mb,
            longest_stall_ms=max(self.stalls_ms, default=0.0),
            stall_share=sum(self.stalls_ms) / 1000 / self._wall if self._wall > 0 else 0.0,
            stall_starts=self.stall_starts,
            stall_ends=self.stall_ends,
            stalls_dropped=self.stalls_dropped,
            host_load_per_core=max(self._loads, default=None),
        )
        if dispatch_lags_ms:
            report.dispatch_lag_p50_ms = float(np.percentile(dispatch_lags_ms, 50))
            report.dispatch_lag_p99_ms = float(np.percentile(dispatch_lags_ms, 99))
        reasons = report.invalid_reasons
        if report.loop_lag_p99_ms is not None and report.loop_lag_p99_ms > LOOP_LAG_P99_LIMIT_MS:
            reasons.append(
                f"event-loop lag P99 {report.loop_lag_p99_ms:.1f} ms > "
                f"{LOOP_LAG_P99_LIMIT_MS:g} ms: timestamps were taken late"
            )
        late = sum(1 for lag in dispatch_lags_ms if lag > DISPATCH_LAG_P99_LIMIT_MS)
        # exact, not Wilson: one late request of a short step must not decide (Wilson's bound for
        # 1 of 8 is 2.2 %)
        late_at_least = exact_lower(late, len(dispatch_lags_ms))
        if open_loop and report.dispatch_lag_p99_ms is not None and late_at_least > DISPATCH_LATE_SHARE:
            reasons.append(
                f"requests went out late (dispatch lag P99 {report.dispatch_lag_p99_ms:.1f} ms"
                f" > {DISPATCH_LAG_P99_LIMIT_MS:g} ms; {late} of {len(dispatch_lags_ms)} late, at least"
                f" {late_at_least:.1%} at 95 %): the load sent was lower than asked"
            )
        # Stalls are judged against the records they held (judge_stalls), not here.
        if report.stall_share > STALL_SHARE_WARNING:
            report.warnings.append(
                f"the client's loop was held up {report.stall_share:.1%} of the run (longest "
                f"{report.longest_stall_ms:.0f} ms): is something else busy on this machine?"
            )
        if cpu_fraction > CPU_LIMIT:
            reasons.append(f"the client used {cpu_fraction:.0%} of a core: it was the bottleneck")
        return report


def own_stalls(report: HealthReport, shift_ns: int = 0) -> Stalls:
    """A process's stalls, moved onto the measuring clock by ``shift_ns`` (a worker's offset)."""
    if not shift_ns:
        return Stalls(report.stall_starts, report.stall_ends)
    return Stalls([s + shift_ns for s in report.stall_starts], [e + shift_ns for e in report.stall_ends])


def judge_stalls(
    report: HealthReport,
    stalls: Mapping[int, Stalls],
    dropped: int,
    records: Sequence[RequestRecord],
    tolerance: float,
) -> None:
    """Place the stalls (by worker) on the records they held: each record says how much they could
    have added to it (``client_stall_ms``); the run is NOT VALID when they could move a headline
    figure out of its interval or held more than ``tolerance`` of the requests."""
    impact, holds = stall_impact(stalls, records, tolerance, dropped)
    for record, hold in zip(records, holds, strict=True):
        record.client_stall_ms = hold.added_ns / 1e6 if hold.added_ns else None
    report.stall_impact = impact
    report.invalid_reasons += impact.reasons
