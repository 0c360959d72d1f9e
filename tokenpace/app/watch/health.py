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
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tokenpace.core.analysis.evidence.gate_noise import host_class

# Limits beyond which the client's own delays distort what it measures.
LOOP_LAG_P99_LIMIT_MS = 5.0
DISPATCH_LAG_P99_LIMIT_MS = 5.0
CPU_LIMIT = 0.90  # share of one core: beyond it the event loop queues work
# A stall: the loop did not run at all (a GC pause, the process descheduled or stopped). Timer
# granularity makes a sleep wake up to ~1 ms late, so only lateness beyond this counts.
STALL_THRESHOLD_MS = 3.0
LONGEST_STALL_LIMIT_MS = 50.0
STALL_SHARE_LIMIT = 0.05  # of the run's wall time
STALL_SHARE_WARNING = 0.01


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
            "stalls": {"longest_ms": self.longest_stall_ms, "share": self.stall_share},
            "host": {"load_per_core": self.host_load_per_core, "class": self.host},
            "cpu_fraction": self.cpu_fraction,
            "cpu_us_per_chunk": self.cpu_us_per_chunk,
            "max_rss_mb": self.max_rss_mb,
            "limits": {
                "loop_lag_p99_ms": LOOP_LAG_P99_LIMIT_MS,
                "dispatch_lag_p99_ms": DISPATCH_LAG_P99_LIMIT_MS,
                "longest_stall_ms": LONGEST_STALL_LIMIT_MS,
                "stall_share": STALL_SHARE_LIMIT,
                "cpu_fraction": CPU_LIMIT,
            },
        }


class HealthMonitor:
    """Samples event-loop lag every ``interval_s`` and CPU time over the run."""

    def __init__(self, interval_s: float = 0.02) -> None:  # 50 probes/s: ~0.3% of a core
        self.interval_s = interval_s
        self.lags_ms: list[float] = []
        self.stalls_ms: list[float] = []
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

        def probe_ran(asked: float) -> None:
            lags.append((time.perf_counter() - asked) * 1000)

        # A frozen loop delays the wake-up itself, which the probe cannot see: measure that too.
        interval, stalls = self.interval_s, self.stalls_ms
        while True:
            slept = time.perf_counter()
            await asyncio.sleep(interval)
            woke = time.perf_counter()
            late_ms = (woke - slept - interval) * 1000
            if late_ms > STALL_THRESHOLD_MS:
                stalls.append(late_ms)
            loop.call_soon(probe_ran, woke)

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
        if (
            open_loop
            and report.dispatch_lag_p99_ms is not None
            and report.dispatch_lag_p99_ms > DISPATCH_LAG_P99_LIMIT_MS
        ):
            reasons.append(
                f"requests went out late (dispatch lag P99 {report.dispatch_lag_p99_ms:.1f} ms"
                f" > {DISPATCH_LAG_P99_LIMIT_MS:g} ms): the load sent was lower than asked"
            )
        if report.longest_stall_ms > LONGEST_STALL_LIMIT_MS or report.stall_share > STALL_SHARE_LIMIT:
            reasons.append(
                f"the client stalled (longest {report.longest_stall_ms:.0f} ms, "
                f"{report.stall_share:.1%} of the run): timestamps in those moments are late"
            )
        elif report.stall_share > STALL_SHARE_WARNING:
            report.warnings.append(
                f"the client's loop was held up {report.stall_share:.1%} of the run (longest "
                f"{report.longest_stall_ms:.0f} ms): is something else busy on this machine?"
            )
        if cpu_fraction > CPU_LIMIT:
            reasons.append(f"the client used {cpu_fraction:.0%} of a core: it was the bottleneck")
        return report
