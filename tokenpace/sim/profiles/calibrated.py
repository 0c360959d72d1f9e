"""A calibrated profile: the fitted step costs written in the shipped profiles' schema.

A calibration measures step costs, not a model's shape, so the profile describes an *effective*
engine whose roofline (tokenpace.sim.model.costmodel) gives exactly the fitted costs, on reference hardware
of 1,000 TFLOP/s and 1,000 GB/s at full efficiency:

- a, prefill time per token  -> active_params_b (FLOPs per token = 2 x active params)
- W, the weights' read      -> params_b (bytes read per step = params_b x 1e9 x weight_bytes of 1)
- p, attention per pair     -> hidden (FLOPs per pair = 4 x layers x hidden, one layer)
- k, KV read per token       -> kv_bytes (one layer, one KV head of dimension one)
- F and S                    -> step_overhead_ms and per_seq_overhead_us
- R                          -> the network's rtt_ms
- step noise, prefill table  -> the engine's step_cv, step_cv_hold_ms, prefill_table_* (step_noise.py)
- the behaviours identified  -> step_floor_ms (a per-step floor), chunked_prefill = false (prefill-first),
                               packed_pair_ns (packed attention, prefill_packing_fit),
                               slow_step_extra_ms and slow_per_seq_extra_us (a second, slower speed)

The [provenance] table keeps the fit in its own units, which runs it came from, which parameters the
data identified and which were left at a default (and why), the residuals, and where it holds.
"""

from __future__ import annotations

from typing import Any

from tokenpace.core.analysis.calibration.engine_costs import EngineFit, StepCosts
from tokenpace.sim.profiles.profile import Efficiency, EngineConfig, Hardware, ModelSpec, Network, Profile

REF_FLOPS = 1e15  # FLOP/s of the effective hardware
REF_BW = 1e12  # bytes/s
# Without a KV gauge the capacity is not identified: room for 1M tokens, i.e. no limit in practice.
UNLIMITED_KV_BLOCKS = 65536
UNLIMITED_MODEL_LEN = 131072


def costs_to_sections(
    c: StepCosts, step_floor: float = 0.0, slow_extra: tuple[float, float] = (0.0, 0.0)
) -> tuple[ModelSpec, Hardware, Efficiency]:
    model = ModelSpec(
        params_b=c.weights * REF_BW / 1e9,
        # 0 would read as "dense: use params_b"; a vanishing value keeps the compute term ~0
        active_params_b=max(c.per_token * REF_FLOPS / 2e9, 1e-12),
        layers=1,
        hidden=round(c.per_pair * REF_FLOPS / 4),
        kv_heads=1,
        head_dim=1,
        weight_bytes=1.0,
        kv_bytes=c.per_context * REF_BW / 2,
    )
    hardware = Hardware("effective (calibrated)", 1, 0.0, REF_BW / 1e9, REF_FLOPS / 1e12)
    efficiency = Efficiency(
        1.0,
        1.0,
        c.fixed * 1e3,
        c.per_seq * 1e6,
        0.0,
        step_floor_ms=step_floor * 1e3,
        slow_step_extra_ms=slow_extra[0] * 1e3,
        slow_per_seq_extra_us=slow_extra[1] * 1e6,
        packed_pair_ns=c.packed_pair * 1e9,
    )
    return model, hardware, efficiency


def sections_to_costs(profile: Profile) -> StepCosts:
    """The step costs a profile's roofline gives (any profile: shipped ones are dense, no MoE here)."""
    m, e = profile.model, profile.efficiency
    return StepCosts(
        fixed=(e.step_overhead_ms + e.tp_comm_ms) / 1e3,
        per_seq=e.per_seq_overhead_us / 1e6,
        weights=m.weight_bytes_read(1) / profile.eff_bw,
        per_context=m.kv_bytes_per_token / profile.eff_bw,
        per_token=m.flops_per_token / profile.eff_flops,
        per_pair=m.attn_flops_per_pair / profile.eff_flops,
        rtt=profile.network.rtt_ms / 1e3,
        packed_pair=e.packed_pair_ns / 1e9,
    )


def calibrated_profile(
    fit: EngineFit, name: str, served_model_name: str, provenance: dict[str, Any]
) -> Profile:
    model, hardware, efficiency = costs_to_sections(
        fit.costs, fit.step_floor, (fit.slow_extra_fixed, fit.slow_extra_per_seq)
    )
    engine = EngineConfig(
        max_num_seqs=fit.max_num_seqs,
        chunked_prefill=not fit.prefill_first,
        prefix_caching=False,  # the sweep's prompts are unique: prefix reuse is not calibrated
        max_model_len=UNLIMITED_MODEL_LEN,
        num_gpu_blocks=-(-fit.kv_tokens // 16) if fit.kv_tokens else UNLIMITED_KV_BLOCKS,
        step_cv=fit.step_cv,
        step_cv_hold_ms=fit.step_cv_hold * 1e3,
        prefill_table_tokens=tuple(n for n, _ in fit.prefill_table),
        prefill_table_ms=tuple(ms for _, ms in fit.prefill_table),
    )
    c = fit.costs
    summary = (
        f"fitted: prefill {c.per_token * 1e6:.3g} ms per 1k tokens + {(c.fixed + c.per_seq) * 1e3:.3g} ms "
        "fixed; "
        f"decode step {c.decode_step(1, 0) * 1e3:.3g} ms at batch 1, +{c.per_seq * 1e3:.3g} ms per sequence; "
        f"round trip {c.rtt * 1e3:.3g} ms; max_num_seqs {fit.max_num_seqs}; "
        f"step time CV {fit.step_cv:.3g}"
        + (f" held {fit.step_cv_hold * 1e3:.3g} ms" if fit.step_cv_hold else "")
        + (f"; prefill as measured at {len(fit.prefill_table)} lengths" if fit.prefill_table else "")
        + (f"; step floor {fit.step_floor * 1e3:.3g} ms" if fit.step_floor else "")
        + ("; prefill-first steps" if fit.prefill_first else "")
        + (f"; packed attention {c.packed_pair * 1e9:.3g} ns a pair" if c.packed_pair else "")
        + (
            f"; a slow speed +{fit.slow_extra_fixed * 1e3:.3g} ms a step, "
            f"{fit.slow_extra_per_seq * 1e3:+.3g} ms a sequence"
            if fit.slow_extra_fixed or fit.slow_extra_per_seq
            else ""
        )
    )
    return Profile(
        name=name,
        description=f"calibrated from measured runs of {served_model_name} (an effective engine)",
        served_model_name=served_model_name,
        model=model,
        hardware=hardware,
        efficiency=efficiency,
        engine=engine,
        network=Network(rtt_ms=c.rtt * 1e3, jitter_ms=fit.jitter * 1e3, name="calibrated"),
        calibration=summary,
        sources=tuple(provenance.get("runs", ())),
        provenance=provenance,
    )


def fit_provenance(fit: EngineFit) -> dict[str, Any]:
    """The fit's part of the provenance: values in their units, identified vs defaulted, residuals."""
    return {
        "fitted": {p.name: f"{p.value:.6g} {p.unit}" for p in fit.params},
        "identified": {p.name: p.how for p in fit.params if p.identified},
        "defaulted": {p.name: p.how for p in fit.params if not p.identified},
        "residuals": dict(fit.residuals),
        "observed": dict(fit.observed),
        "holds": list(fit.holds),
        "behaviours": list(fit.behaviours),
        "moved_within": list(fit.moved_within),
    }


def fit_error(profile: Profile) -> float:
    """The calibration's relative error (the worst of its prefill and decode residuals and of a decode
    speed that moved during its sweep, engine_drift), by which select widens a predicted candidate's
    intervals (--validate judges the prediction unwidened, and gates the fit on its residuals)."""
    residuals = (profile.provenance or {}).get("residuals") or {}
    keys = ("prefill_rel_rms", "decode_rel_rms", "decode_drift")
    return max(float(residuals.get(k, 0.0)) for k in keys)
