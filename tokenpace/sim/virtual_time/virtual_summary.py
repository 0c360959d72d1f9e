"""A virtual run in numbers: the core's summary of the client's records, plus the engine's own view.

The client-side numbers (TTFT, TPOT, E2E, percentiles, throughput over the window) are
`tokenpace.core.metrics.summarize` over the records the run made, so they mean exactly what they
mean for a real run. The simulator adds only what a client cannot see: time queued inside the engine,
prefix-cache hits and preemptions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from tokenpace.core.metrics import Slo, Summary, summarize
from tokenpace.core.stats import Distribution, describe
from tokenpace.sim.profiles.profile import Network, Profile
from tokenpace.sim.virtual_time.virtual import VirtualResult
from tokenpace.sim.virtual_time.virtual_load import VirtualLoad
from tokenpace.sim.virtual_time.virtual_stream import StreamedSummary, with_engine_view


@dataclass(slots=True)
class VirtualSummary:
    client: Summary  # what a client would have measured
    engine_queue_ms: Distribution  # reaching the engine to its first step
    cached_tokens: int  # prompt tokens served by the prefix cache
    preemptions: int

    def to_dict(self) -> dict[str, Any]:
        return with_engine_view(
            self.client.to_dict(), self.engine_queue_ms, self.cached_tokens, self.preemptions
        )


def summarize_virtual(
    results: list[VirtualResult], slo: Slo | None = None, with_ci: bool = True
) -> VirtualSummary:
    return VirtualSummary(
        client=summarize([r.record for r in results], slo, with_ci=with_ci),
        engine_queue_ms=describe([r.engine_queue * 1e3 for r in results], with_ci=with_ci),
        cached_tokens=sum(r.cached_tokens for r in results),
        preemptions=sum(r.preemptions for r in results),
    )


def steps_of(load: VirtualLoad, results: list[VirtualResult]) -> list[tuple[str, list[VirtualResult]]]:
    """The results of each ladder step under its label (`4/s`), or the closed loop's (`c=16`)."""
    if not load.rates:
        return [(f"c={load.concurrency}", results)]
    return [(f"{rate:g}/s", [r for r in results if r.step == k]) for k, rate in enumerate(load.rates)]


def virtual_run_doc(
    load: VirtualLoad,
    profile: Profile,
    network: Network,
    results: list[VirtualResult],
    steps: Sequence[tuple[str, VirtualSummary | StreamedSummary]],
) -> dict[str, Any]:
    """A virtual run as JSON: its conditions, each step's summary and every request."""
    return {
        "conditions": {
            "profile": profile.name,
            "predicted_by": "calibrated profile" if profile.calibrated else "shipped profile",
            "network": asdict(network),
            "workload": load.conditions(),
            "clock": "virtual",
        },
        "steps": [{"step": label, **s.to_dict()} for label, s in steps],
        "requests": [r.to_dict() for r in results],
    }
