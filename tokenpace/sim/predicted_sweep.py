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
which select widens the predicted intervals.
"""

from __future__ import annotations

from typing import Any

from tokenpace.core.metrics import NS_PER_MS, e2e_ns, summarize, tpot_ns, ttft_ns
from tokenpace.sim.calibrated import fit_error
from tokenpace.sim.profile import Network, Profile
from tokenpace.sim.virtual import VirtualResult
from tokenpace.sim.virtual_load import VirtualLoad

SAMPLE_CAP = 2_000  # requests kept per step for select's attainment (about 60 kB of JSON a step)


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


def _step_doc(load: VirtualLoad, k: int, results: list[VirtualResult], replicas: int) -> dict[str, Any]:
    rate = load.rates[k] if load.rates else None
    open_loop = rate is not None
    summary = summarize([r.record for r in results], open_loop=open_loop).to_dict()
    return {
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
                "requests": len(results),
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
        "sample": request_sample(results),
    }


def predicted_sweep_doc(
    load: VirtualLoad,
    profile: Profile,
    network: Network,
    steps: list[list[VirtualResult]],
    replicas: int = 1,
) -> dict[str, Any]:
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
            "note": "every figure is predicted by the simulator in virtual time; no load was measured",
        },
        "steps": [_step_doc(load, k, results, replicas) for k, results in enumerate(steps)],
    }
