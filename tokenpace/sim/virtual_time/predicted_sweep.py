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
failed its quality gate, a slot limit not identified: plan and select show them beside every figure
and verdict), ``predicted.pass_unproven`` why no pass from it is proven (select calls such a pass
undecided), and each step's ``beyond_profile`` why it lies past what the profile vouches for ("" when
it does not): plan and select leave such a step out, with that reason, as they leave out a measured
step that is not valid; a scenario that step would judge is undecided, with it.

A summary-only run (no records) gives the same document from its streaming summaries: percentiles
from the sketches (within 1 %) with the same distribution-free intervals a records step has, read
from the sketches' ranks and widened by their error (`LogSketch.distribution(with_ci=True)`), and
the stride sample each step kept (`virtual_stream.StrideSample`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from tokenpace.core.metrics import NS_PER_MS, e2e_ns, summarize, tpot_ns, ttft_ns
from tokenpace.sim.model.costmodel import CostModel
from tokenpace.sim.profiles.calibrated import fit_error
from tokenpace.sim.profiles.limits import Offered, ProfileLimits, limits_of
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


def offered_load(profile: Profile, limits: ProfileLimits, load: VirtualLoad, rate: float) -> Offered:
    """What an open-loop rate (per replica) asks of the engine, from the rate alone: the model's time a
    request of the load's mean lengths takes at the calibration's largest batch (its prefill, then its
    decode steps at that batch, stretched by the other arrivals' prefills they wait behind), and the
    arrivals' dispersion (gamma: 1 / burstiness, the squared CV of the gaps)."""
    cost = CostModel(profile)
    prompt, out = load.input_len.mean, load.output_len.mean
    batch = max(1, round(limits.batch_seen))
    prefill = cost.prefill_seconds(max(1, round(prompt)))
    step = cost.decode_step_seconds(batch, round(prompt + out / 2))
    busy = rate * prefill  # the share of the engine's time its prefills take
    per_request = prefill + max(0.0, out - 1) * step / (1 - busy) if busy < 1 else math.inf
    dispersion = 1 / load.burstiness if load.arrival == "gamma" else 1.0
    return Offered(rate, per_request, dispersion)


def step_beyond(profile: Profile, load: VirtualLoad, k: int, summary: dict[str, Any], replicas: int) -> str:
    """Why step k lies past what the profile vouches for ("" when it does not): its requests in flight
    per engine (a closed loop's users; an open loop's rate x mean E2E, Little's law, and, with no slot
    limit identified, its offered load against the calibration's batch: ``offered_load``) and its
    longest prompt."""
    limits = limits_of(profile)
    rate = load.rates[k] if load.rates else None
    offered = None
    if rate is None:
        in_flight: float | None = load.concurrency / replicas
    else:
        e2e_mean = (summary.get("e2e_ms") or {}).get("mean")
        in_flight = rate / replicas * float(e2e_mean) / 1e3 if e2e_mean is not None else None
        if limits.calibrated and not limits.slot_limit_identified:
            offered = offered_load(profile, limits, load, rate / replicas)
    prompt = (summary.get("prompt_tokens") or {}).get("max")
    return limits.beyond(in_flight, float(prompt) if prompt is not None else None, offered=offered)


def _step_doc(load: VirtualLoad, k: int, data: StepData, replicas: int, profile: Profile) -> dict[str, Any]:
    rate = load.rates[k] if load.rates else None
    open_loop = rate is not None
    summary, sample, requests = data
    return {
        "beyond_profile": step_beyond(profile, load, k, summary, replicas),
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
            "pass_unproven": limits.pass_unproven(),
            "note": "every figure is predicted by the simulator in virtual time; no load was measured",
        },
        "steps": [_step_doc(load, k, d, replicas, profile) for k, d in enumerate(data)],
    }
