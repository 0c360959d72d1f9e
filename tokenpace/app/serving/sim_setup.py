"""Use case: the simulated engine as `tokenpace sim` sets it up from its options, and a workload run
on it in virtual time (no sockets, no wall clock): the load, the steps' summaries, the JSON."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokenpace.adapters.results import write_result
from tokenpace.sim.endpoints.faults import FaultConfig
from tokenpace.sim.model.describe import describe_profiles
from tokenpace.sim.profiles.limits import limits_of
from tokenpace.sim.profiles.profile import Network, Profile, get_network, get_profile
from tokenpace.sim.virtual_time.predicted_sweep import predicted_sweep_doc, step_beyond
from tokenpace.sim.virtual_time.replicas import run_replicated, run_replicated_streamed
from tokenpace.sim.virtual_time.virtual import VirtualResult
from tokenpace.sim.virtual_time.virtual_load import VirtualLoad
from tokenpace.sim.virtual_time.virtual_stream import RECORDS_NOT_KEPT, SUMMARY_ONLY_ABOVE, StreamedSummary
from tokenpace.sim.virtual_time.virtual_summary import (
    VirtualSummary,
    steps_of,
    summarize_virtual,
    virtual_run_doc,
)

__all__ = [
    "FaultConfig",
    "Network",
    "Profile",
    "StreamedSummary",
    "VirtualRun",
    "VirtualSummary",
    "describe_profiles",
    "run_virtual_load",
    "sim_setup",
    "virtual_load_from_options",
]


def sim_setup(o: Mapping[str, Any]) -> tuple[Profile, Network, FaultConfig]:
    """The profile (with the engine flags over it), the network and the faults the options ask for;
    ValueError (one line) on bad input."""
    profile = get_profile(o["profile_name"])
    if o.get("speed") == "slow":
        profile = profile.at_slow_speed()
    engine = {
        k: o[k]
        for k in (
            "chunked_prefill",
            "prefix_caching",
            "max_num_seqs",
            "max_num_batched_tokens",
            "num_gpu_blocks",
            "eos_prob",
            "reasoning_tokens",
            "tokens_per_chunk",
            "usage_every_chunk",
        )
        if o[k] is not None
    }
    extra: dict[str, Any] = {"engine": engine} if engine else {}
    if o["served_model_name"]:
        extra["served_model_name"] = o["served_model_name"]
    if extra:
        profile = profile.with_overrides(**extra)
    network = get_network(o["network"]) if o["network"] else profile.network
    if o["rtt_ms"] is not None or o["jitter_ms"] is not None:
        network = Network(
            rtt_ms=o["rtt_ms"] if o["rtt_ms"] is not None else network.rtt_ms,
            jitter_ms=o["jitter_ms"] if o["jitter_ms"] is not None else network.jitter_ms,
            name="custom",
        )
    flags: dict[str, Any] = {
        "error_rate": o["fault_error_rate"],
        "rate_limit_rate": o["fault_429_rate"],
        "retry_after_s": o["retry_after"],
        "hang_rate": o["fault_hang_rate"],
        "cut_rate": o["fault_cut_rate"],
        "malformed_rate": o["fault_malformed_rate"],
        "cold_start_s": o["cold_start"],
        "cold_start_factor": o["cold_start_factor"],
    }
    if o["fault_error_codes"]:
        try:
            flags["error_codes"] = tuple(int(c) for c in o["fault_error_codes"].split(","))
        except ValueError:
            raise ValueError(
                f"bad --fault-error-codes {o['fault_error_codes']!r}: use e.g. 500,503"
            ) from None
    if o["no_fault_header"]:
        flags["allow_header"] = False
    flags = {k: v for k, v in flags.items() if v is not None}
    flags["seed"] = o["seed"]
    faults = (
        FaultConfig.from_file(Path(o["faults_file"]), **flags) if o["faults_file"] else FaultConfig(**flags)
    )
    return profile, network, faults


def virtual_load_from_options(o: Mapping[str, Any]) -> VirtualLoad:
    """The load from `tokenpace sim` options (lengths and duration already parsed)."""
    rates: tuple[float, ...] = ()
    if o.get("rate"):
        try:
            rates = tuple(float(r) for r in str(o["rate"]).split(","))
        except ValueError:
            raise ValueError(f"bad --rate {o['rate']!r}: use R or a ladder R1,R2,...") from None
    if rates and o.get("concurrency"):
        raise ValueError("give either --rate or --concurrency, not both")
    load = VirtualLoad(
        input_len=o["input_len"],
        output_len=o["output_len"],
        rates=rates,
        arrival=o["arrival"],
        burstiness=o["burstiness"],
        step_duration_s=o["duration"],
        concurrency=o.get("concurrency") or (0 if rates else 1),
        requests=o.get("requests") or 0,
        shared_prefix=o.get("shared_prefix") or 0,
        seed=o.get("seed") or 0,
    )
    load.validate()
    return load


@dataclass
class VirtualRun:
    load: VirtualLoad
    profile: Profile
    network: Network
    results: list[VirtualResult]  # empty when records were not kept
    steps: list[tuple[str, VirtualSummary | StreamedSummary]]  # (label, summary) per ladder step
    per_step: list[list[VirtualResult]]  # each step's results, in order
    replicas: int = 1
    records_note: str | None = None  # why there are no records (summary only), else None

    def write(self, path: Path) -> None:
        doc = virtual_run_doc(self.load, self.profile, self.network, self.results, self.steps)
        if self.records_note:
            doc["requests"] = self.records_note
        path.write_text(json.dumps(doc, indent=1), encoding="utf-8")

    def caveats(self) -> list[str]:
        """What the profile carries into every prediction (a calibrated profile's limits)."""
        return limits_of(self.profile).caveats()

    def undecided_steps(self) -> list[tuple[str, str]]:
        """(step, why) for each step past what the profile vouches for: predicted, not to be judged."""
        out = []
        for k, (label, summary) in enumerate(self.steps):
            why = step_beyond(self.profile, self.load, k, summary.client.to_dict(), self.replicas)
            if why:
                out.append((label, why))
        return out

    def write_predicted_sweep(self, path: Path) -> None:
        """The steps as a sweep marked predicted (``tokenpace plan`` reads it)."""
        streamed = [s for _, s in self.steps if isinstance(s, StreamedSummary)] if self.records_note else []
        doc = predicted_sweep_doc(
            self.load, self.profile, self.network, self.per_step, self.replicas, streamed=streamed
        )
        write_result(path, doc)


def expected_requests(load: VirtualLoad) -> int:
    """About how many requests the load sends (a closed loop run by duration: not known, 0)."""
    if load.rates:
        return round(sum(load.rates) * load.step_duration_s)
    return len(load.sends) or load.requests


def run_virtual_load(o: Mapping[str, Any], profile: Profile, network: Network) -> VirtualRun:
    """The options' load run in virtual time (on ``--replicas`` engines); ValueError (one line) on
    a bad load."""
    load = virtual_load_from_options(o)
    replicas = o.get("replicas") or 1
    if o.get("summary_only") or expected_requests(load) > SUMMARY_ONLY_ABOVE:
        streamed = run_replicated_streamed(load, profile, network, replicas)
        labels = [label for label, _ in steps_of(load, [])]
        summaries: list[tuple[str, VirtualSummary | StreamedSummary]] = [
            (label, step.summary()) for label, step in zip(labels, streamed, strict=True)
        ]
        return VirtualRun(load, profile, network, [], summaries, [], replicas, RECORDS_NOT_KEPT)
    results = run_replicated(load, profile, network, replicas)
    per_step = steps_of(load, results)
    steps: list[tuple[str, VirtualSummary | StreamedSummary]] = [
        (label, summarize_virtual(r)) for label, r in per_step
    ]
    return VirtualRun(load, profile, network, results, steps, [r for _, r in per_step], replicas)
