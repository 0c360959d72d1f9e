"""Human-readable profile listing for `tokenpace sim --list-profiles`."""

from __future__ import annotations

from tokenpace.sim.model.costmodel import CostModel
from tokenpace.sim.profiles.profile import (
    Profile,
    default_profile_name,
    get_network,
    get_profile,
    network_names,
)


def profile_figures(p: Profile) -> str:
    """The figures the cost model gives, so a user can check them against what they know."""
    c = CostModel(p)
    batches = sorted({1, min(64, p.engine.max_num_seqs), p.engine.max_num_seqs})  # each batch once
    steps = ", ".join(f"{c.decode_step_seconds(b, 1024) * 1e3:.1f} ms at {b}" for b in batches)
    kv_tokens = p.num_gpu_blocks * p.engine.block_size
    return (
        f"decode step {steps.replace(' at 1,', ' at batch 1,', 1)} (1k context); "
        f"prefill {2048 / c.prefill_seconds(2048):,.0f} tokens/s (2k prompt alone: "
        f"{c.prefill_seconds(2048) * 1e3:.0f} ms); KV {kv_tokens:,} tokens"
    )


def describe_profiles() -> str:
    from tokenpace.sim.profiles.profile import profile_names

    default = default_profile_name()
    lines: list[str] = []
    for name in profile_names():
        p = get_profile(name)
        e = p.engine
        lines.append(f"{name}{'  (default)' if name == default else ''}")
        lines.append(f"  {p.description}")
        lines.append(f"  served as {p.served_model_name!r} on {p.hardware.name}; network {p.network.name}")
        lines.append(
            f"  engine: max_num_seqs {e.max_num_seqs}, max_num_batched_tokens {e.max_num_batched_tokens}, "
            f"chunked prefill {'on' if e.chunked_prefill else 'off'}, "
            f"prefix caching {'on' if e.prefix_caching else 'off'}, max_model_len {e.max_model_len}"
        )
        lines.append(f"  model: {profile_figures(p)}")
        if p.calibration:
            lines.append(f"  calibration: {p.calibration}")
        for s in p.sources:
            lines.append(f"  source: {s}")
        lines.append("")
    lines.append(
        "networks (--network): "
        + ", ".join(
            f"{n} ({get_network(n).rtt_ms:g} ms RTT ± {get_network(n).jitter_ms:g})" for n in network_names()
        )
    )
    return "\n".join(lines)
