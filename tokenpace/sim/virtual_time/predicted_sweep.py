"""A virtual run's steps as a tokenpace sweep document, marked predicted, so `tokenpace plan` sizes a
fleet from a (calibrated) profile the way it does from a measured sweep, and says so.

Each step is the `bench --out` shape the planners read (conditions.load, summary from the core's
`summarize` of the virtual records); the document carries `predicted` (which profile, calibrated or
not, and its provenance's summary) and a sweep_id that starts with "predicted-", so no reader can take
it for a measurement.

Each step also keeps a per-request sample (TTFT, TPOT, E2E in ms; every request up to SAMPLE_CAP,
else an even stride through them), from which `tokenpace select` counts the requests meeting a
scenario's lines (attainment, goodput) the way it counts a measured run's records. The document's
``predicted.fit_error`` is the calibration's relative fit residual (0 for a shipped profile), by
which select widens the predicted intervals; ``predicted.caveats`` what the profile carries (a fit that
failed its quality gate, a slot limit not identified), and each step's ``beyond_profile`` why it lies
past what the profile vouches for ("" when it does not): plan and select leave such a step out, with
that reason, as they leave out a measured step that is not valid.

A summary-only run (no records) gives the same document from its streaming summaries: percentiles
from the sketches (within 1 %) with the same distribution-free intervals a records step has, read
from the sketches' ranks and widened by their error (`LogSketch.distribution(with_ci=True)`), and
the stride sample each step kept (`virtual_stream.StrideSample`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tokenpace.core.metrics import NS_PER_MS, e2e_ns, summarize, tpot_ns, ttft_ns
from tokenpace.sim.profiles.calibrated import fit_error
from tokenpace.sim.profiles.limits import ProfileLimits, limits_of
from tokenpace.sim.profiles.profile import Network, Profile
from tokenpace.sim.virtual_time.virtual import VirtualResult
from tokenpace.sim.virtual_time.virtual_load import VirtualLoad
from tokenpace.sim.virtual_time.virtual_stream import SAMPLE_CAP, StreamedSummary

__all__ = ["SAMPLE_CAP", "predicted_sweep_doc", "request_sample", "step_beyond"]


def _ms(ns: float | None) -> float | None:
    return None if ns is None else round(ns / NS_PER_MS, 4)


def request_sample(results: list[VirtualResult]) -> dict[str, list[float | None]]:
    """Every request's TTFT, TPOT and E2E (ms), or an even stride of SAMPLE_CAP of them. A virtual
    client is never late, so these are also the times from the scheduled send."""
    stride = max(1, -(-len(results) // SAMPLE_CAP))
    kept = results[::stride]
    return {
        "ttft_ms": [_ms(ttft_ns(r.record)) for r in kept],
        "tpot_ms": [_ms(tpot_ns(r.record)) for r in kept],
        "e2e_ms": [_ms(e2e_ns(r.record)) for r in kept],
    }


# A step's summary (bench's shape), its request sample and how many requests it finished.
StepData = tuple[dict[str, Any], dict[str, list[float | None]], int]


def _records_step(load: VirtualLoad, results: list[VirtualResult]) -> StepData:
    summary = summarize([r.record for r in results], open_loop=bool(load.rates)).to_dict()
    return summary, request_sample(results), len(results)


def _streamed_step(s: StreamedSummary) -> StepData:
    """A summary-only step: the sketches' percentiles with their rank intervals, and the stride
    sample the step kept."""
    return s.client.to_dict(), s.sample, s.client.counts["ok"]


def step_beyond(
    limits: ProfileLimits, load: VirtualLoad, k: int, summary: dict[str, Any], replicas: int
) -> str:
    """Why step k lies past what the profile vouches for ("" when it does not): its requests in flight
    per engine (a closed loop's users; an open loop's rate x mean E2E, Little's law) and its longest
    prompt."""
    rate = load.rates[k] if load.rates else None
    if rate is None:
        in_flight: float | None = load.concurrency / replicas
    else:
        e2e_mean = (summary.get("e2e_ms") or {}).get("mean")
        in_flight = rate / replicas * float(e2e_mean) / 1e3 if e2e_mean is not None else None
    prompt = (summary.get("prompt_tokens") or {}).get("max")
    return limits.beyond(in_flight, float(prompt) if prompt is not None else None)


def _step_doc(
    load: VirtualLoad, k: int, data: StepData, replicas: int, limits: ProfileLimits
) -> dict[str, Any]:
    rate = load.rates[k] if load.rates else None
    open_loop = rate is not None
    summary, sample, requests = data
    return {
        "beyond_profile": step_beyond(limits, load, k, summary, replicas),
        "valid": True,
        "interrupted": False,
        "predicted": True,
        "conditions": {
            "load": {
                "mode": "open_loop" if open_loop else "closed_loop",
                "concurrency": None if open_loop else load.concurrency,
                "rate": rate,
                "arrival": load.arrival if open_loop else None,
                "burstiness": load.burstiness if open_loop else None,
                "max_concurrency": None,
                "requests": requests,
                "duration_s": load.step_duration_s,
            },
            "workload": {
                "kind": "synthetic",
                "input_len": load.input_len.describe(),
                "output_len": load.output_len.describe(),
            },
            "replicas": replicas,
            "clock": "virtual",
        },
        "summary": summary,
        "sample": sample,
    }


def predicted_sweep_doc(
    load: VirtualLoad,
    profile: Profile,
    network: Network,
    steps: list[list[VirtualResult]],
    replicas: int = 1,
    streamed: Sequence[StreamedSummary] = (),
) -> dict[str, Any]:
    """Each step from its records, or (`streamed`, a summary-only run) from its streaming summary."""
    data = [_streamed_step(s) for s in streamed] if streamed else [_records_step(load, r) for r in steps]
    limits = limits_of(profile)
    kind = "calibrated profile" if profile.calibrated else "shipped profile (not calibrated to your engine)"
    return {
        "kind": "sweep",
        "sweep_id": f"predicted-{profile.name}",
        "mode": "rate" if load.rates else "concurrency",
        "auto": False,
        "interrupted": False,
        "stop_reason": "completed",
        "slo": None,
        "slo_percentile": "p95",
        "predicted": {
            "profile": profile.name,
            "kind": kind,
            "calibration": profile.calibration,
            "network": network.name,
            "replicas": replicas,
            "fit_error": fit_error(profile),
            "caveats": limits.caveats(),
            "note": "every figure is predicted by the simulator in virtual time; no load was measured",
        },
        "steps": [_step_doc(load, k, d, replicas, limits) for k, d in enumerate(data)],
    }
