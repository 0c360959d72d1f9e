"""Engine profiles: a model on some hardware, run by a vLLM-like engine, read from profiles.json.

A profile holds public facts (model shape, hardware peaks) plus a few efficiency assumptions; every
derived quantity the cost model needs (FLOPs per token, bytes read per step, KV capacity) is computed
here so the data file stays readable.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, fields, replace
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from tokenpace.sim.profiles.profile_checks import check_model, check_section
from tokenpace.sim.profiles.profile_file import ProfileFileError, read_profile_file

GB = 1e9


@dataclass(frozen=True, slots=True)
class ModelSpec:
    params_b: float  # total parameters, billions
    layers: int
    hidden: int
    kv_heads: int
    head_dim: int
    weight_bytes: float  # bytes per weight (2 for BF16, ~0.56 for Q4_K_M)
    kv_bytes: float  # bytes per KV element
    active_params_b: float | None = None  # MoE: parameters used per token
    expert_params_b: float = 0.0  # MoE: parameters that live in routed experts
    experts: int = 0
    top_k: int = 0

    @property
    def flops_per_token(self) -> float:
        """Dense matmul FLOPs per token: two per active parameter."""
        return 2.0 * (self.active_params_b or self.params_b) * GB

    @property
    def attn_flops_per_pair(self) -> float:
        """FLOPs of QK^T and AV for one (query token, context token) pair, all layers."""
        return 4.0 * self.layers * self.hidden

    @property
    def kv_bytes_per_token(self) -> float:
        return 2.0 * self.layers * self.kv_heads * self.head_dim * self.kv_bytes

    def weight_bytes_read(self, n_tokens: int) -> float:
        """Weight bytes a step must stream from memory when it processes n_tokens tokens.

        Dense: all weights, once per step. MoE: the shared part plus each expert touched by at least one
        token; with top_k of E experts per token, a fraction 1 - (1 - k/E)^n of them is touched.
        """
        if self.experts <= 0 or n_tokens <= 0:
            return self.params_b * GB * self.weight_bytes
        dense = self.params_b - self.expert_params_b
        touched = 1.0 - (1.0 - self.top_k / self.experts) ** n_tokens
        return (dense + self.expert_params_b * touched) * GB * self.weight_bytes


@dataclass(frozen=True, slots=True)
class Hardware:
    name: str
    gpus: int
    mem_gb: float  # per GPU
    mem_bw_gbs: float  # per GPU, GB/s
    tflops: float  # per GPU, dense 16-bit tensor FLOP/s in TFLOP/s


@dataclass(frozen=True, slots=True)
class Efficiency:
    mfu: float  # share of peak FLOP/s reached by compute-bound work
    mbu: float  # share of peak bandwidth reached by memory-bound work
    step_overhead_ms: float  # scheduler, sampling, kernel launches: paid once per engine step
    per_seq_overhead_us: float  # per running sequence per step (sampling, detokenising, output)
    tp_comm_ms: float  # tensor-parallel all-reduces, per step
    # Scheduler behaviours real engines show beyond vLLM's (docs/sim-explained.md "The engine model"); the
    # defaults are vLLM's, so shipped profiles are unchanged.
    # A step never takes less than this, whatever its batch: the batch's work hides under it until it
    # exceeds it (launch- or Python-bound engines: Hugging Face `transformers serve`, eager PyTorch
    # without CUDA graphs). Evidence in a sweep: time per output token flat across concurrencies
    # (17-25 ms from 1 to 16 users on an H200), identified by `--calibrate` against a line.
    step_floor_ms: float = 0.0
    # A fixed cost each request pays outside the engine's steps before the scheduler sees it (the
    # API server's parsing, chat template, tokenising), apart from the network: it delays TTFT and
    # E2E alike and takes no step time. Evidence: TTFT's excess over one prefill step with the
    # server's own TTFT (its metrics) showing the network's share.
    request_overhead_ms: float = 0.0
    # A second, slower speed the engine ran at (`--calibrate` found it: waves that decoded 2x or more
    # slower than their load's others, in two loads or more), as what it adds to each step and to each
    # sequence in a step. The engine runs the fast speed; `sim --speed slow` and `--validate` (for a
    # load whose waves ran slow) the slow one. 0, 0: one speed (every shipped profile).
    slow_step_extra_ms: float = 0.0
    slow_per_seq_extra_us: float = 0.0
    # Packed attention: a step that holds a prefill beside other sequences runs them as one packed row
    # under one mask and pays this for every (query token, key token) pair of the whole step, in place
    # of the prompts' own prefill price (Hugging Face `transformers serve` with continuous batching).
    # Evidence: a step holding newcomers costs more the more requests decode beside it
    # (`--calibrate` reads it from the per-token timestamps). 0: each sequence's own pairs (vLLM's).
    packed_pair_ns: float = 0.0


@dataclass(frozen=True, slots=True)
class EngineConfig:
    block_size: int = 16
    gpu_memory_utilization: float = 0.9
    max_num_seqs: int = 256
    # The per-step token budget (vLLM and SGLang's max_num_batched_tokens): with chunked prefill,
    # prefills and decodes share each step and a long prompt is cut to fit the budget (vLLM V1,
    # SGLang). Evidence in a sweep: TTFT of long prompts grows in budget-sized steps, decodes keep
    # their pace while a newcomer prefills.
    max_num_batched_tokens: int = 8192
    # False: prefill-first steps that pause the running decodes (engines without mixed batches:
    # vLLM V0 without chunked prefill, older TGI). Evidence: the per-token timestamps' gaps that
    # span a newcomer's prefill are longer than the others by a prefill step (`--calibrate` tests it).
    chunked_prefill: bool = True
    # With chunking, the most tokens one request may prefill per step (vLLM's
    # long_prefill_token_threshold); 0 = up to the whole budget. Leaves room for short prompts.
    long_prefill_token_threshold: int = 0
    prefix_caching: bool = True
    max_model_len: int = 32768
    eos_prob: float = 0.0  # per generated token after min_tokens; 0 = always run to max_tokens
    num_gpu_blocks: int | None = None  # fixed KV capacity; None = derive from memory
    # How answers stream (a request's body may override each): reasoning tokens before the answer
    # (chat-style APIs), tokens per streamed chunk, and usage on every chunk.
    reasoning_tokens: int = 0
    tokens_per_chunk: int = 1
    usage_every_chunk: bool = False
    # Measured terms of the cost model (sim/model/step_noise.py), set by a calibration; off by default.
    # Step-time variability: a lognormal factor of this coefficient of variation on every step, its
    # log correlated over step_cv_hold_ms of simulated time (0: independent steps).
    step_cv: float = 0.0
    step_cv_hold_ms: float = 0.0
    # Prefill time (ms, from scratch, compute part) against prompt length, where the roofline's
    # line-plus-curve misfits the measured ladder; empty: the roofline prices prefill.
    prefill_table_tokens: tuple[float, ...] = ()
    prefill_table_ms: tuple[float, ...] = ()


@dataclass(frozen=True, slots=True)
class Network:
    rtt_ms: float = 0.0
    jitter_ms: float = 0.0
    name: str = "local"


@dataclass(frozen=True, slots=True)
class Profile:
    name: str
    description: str
    served_model_name: str
    model: ModelSpec
    hardware: Hardware
    efficiency: Efficiency
    engine: EngineConfig
    network: Network
    calibration: str = ""
    sources: tuple[str, ...] = field(default_factory=tuple)
    # A calibrated profile's record of how it was made (runs, engine, fit, residuals); see calibrated.py.
    provenance: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def calibrated(self) -> bool:
        """Fitted to measured runs (`tokenpace sim --calibrate`): what it predicts is a prediction."""
        return bool(self.provenance)

    @property
    def eff_flops(self) -> float:
        return self.hardware.tflops * 1e12 * self.hardware.gpus * self.efficiency.mfu

    @property
    def eff_bw(self) -> float:
        return self.hardware.mem_bw_gbs * GB * self.hardware.gpus * self.efficiency.mbu

    @property
    def num_gpu_blocks(self) -> int:
        """KV blocks: memory the engine may use, minus weights and an activation reserve."""
        if self.engine.num_gpu_blocks is not None:
            return self.engine.num_gpu_blocks
        hw = self.hardware
        usable = hw.mem_gb * GB * hw.gpus * self.engine.gpu_memory_utilization
        weights = self.model.params_b * GB * self.model.weight_bytes
        reserve = 2.0 * GB * hw.gpus  # activations, CUDA graphs, sampler buffers
        per_block = self.model.kv_bytes_per_token * self.engine.block_size
        if per_block <= 0:  # no KV size to derive a count from: num_gpu_blocks must say it
            return 0
        return max(0, int((usable - weights - reserve) // per_block))

    @property
    def has_slow_speed(self) -> bool:
        e = self.efficiency
        return e.slow_step_extra_ms != 0.0 or e.slow_per_seq_extra_us != 0.0

    def at_slow_speed(self) -> Profile:
        """The engine at its slow speed: the extras added to its step costs (ValueError if it has none)."""
        if not self.has_slow_speed:
            raise ValueError(f"{self.name!r} has one speed (no slow_step_extra_ms): nothing slow to run")
        e = self.efficiency
        return self.with_overrides(
            efficiency={
                "step_overhead_ms": e.step_overhead_ms + e.slow_step_extra_ms,
                "per_seq_overhead_us": e.per_seq_overhead_us + e.slow_per_seq_extra_us,
                "slow_step_extra_ms": 0.0,
                "slow_per_seq_extra_us": 0.0,
            },
            # what it runs, said by its caveats (sim.profiles.limits)
            provenance={
                **self.provenance,
                "running_speed": "slow",
                "slow_step_extra_ms": e.slow_step_extra_ms,
            },
        )

    def at_level(self, extra_ms: float) -> Profile:
        """The engine at one speed, `extra_ms` over its fast one on every step (a level a load was seen
        to run at: `--validate` of an engine seen at two speeds); a step is never priced below nothing."""
        e = self.efficiency
        return self.with_overrides(
            efficiency={
                "step_overhead_ms": max(0.0, e.step_overhead_ms + extra_ms),
                "slow_step_extra_ms": 0.0,
                "slow_per_seq_extra_us": 0.0,
            },
            provenance={**self.provenance, "running_speed": "level", "slow_step_extra_ms": extra_ms},
        )

    def with_overrides(self, **sections: dict[str, Any]) -> Profile:
        """A copy with some fields replaced, e.g. with_overrides(engine={"chunked_prefill": False})."""
        changes: dict[str, Any] = {}
        for key, values in sections.items():
            if key in ("model", "hardware", "efficiency", "engine", "network"):
                changes[key] = replace(getattr(self, key), **values)
            else:
                changes[key] = values
        return replace(self, **changes)


class ProfileError(ValueError):
    pass


@cache
def _raw() -> dict[str, Any]:
    text = resources.files("tokenpace.sim.profiles").joinpath("profiles.json").read_text(encoding="utf-8")
    doc: dict[str, Any] = json.loads(text)
    return doc


def default_profile_name() -> str:
    return str(_raw()["default"])


def network_names() -> list[str]:
    return list(_raw()["networks"])


def get_network(name: str) -> Network:
    nets = _raw()["networks"]
    if name not in nets:
        raise ProfileError(f"unknown network {name!r}; known: {', '.join(nets)}")
    n = nets[name]
    return Network(rtt_ms=float(n["rtt_ms"]), jitter_ms=float(n["jitter_ms"]), name=name)


def profile_names() -> list[str]:
    return list(_raw()["profiles"])


def is_profile_file(name: str) -> bool:
    """A profile given as a file (a calibrated profile) rather than a shipped profile's name."""
    return name.endswith(".toml") or "/" in name


def load_profile_file(path: str | Path) -> Profile:
    """A profile file (TOML, the shipped profiles' schema: e.g. from `tokenpace sim --calibrate`)."""
    try:
        name, doc = read_profile_file(path)
    except ProfileFileError as e:
        raise ProfileError(str(e)) from None
    return profile_from_dict(name, doc)


def get_profile(name: str | None = None) -> Profile:
    """A shipped profile by name, or a profile file (TOML, e.g. from `tokenpace sim --calibrate`)."""
    name = name or default_profile_name()
    if is_profile_file(name):
        return load_profile_file(name)
    profiles = _raw()["profiles"]
    if name not in profiles:
        raise ProfileError(
            f"unknown profile {name!r}; known: {', '.join(profiles)} (or a profile file, PATH.toml)"
        )
    return profile_from_dict(name, profiles[name])


def profile_from_dict(name: str, p: dict[str, Any]) -> Profile:
    """A profile from its sections; `network` is a preset's name or a table of rtt_ms and jitter_ms.
    Every value is checked (profile_checks.py): ProfileError, one line, past any of them."""
    try:
        net = p.get("network", "local")
        if isinstance(net, str):
            network = get_network(net)
        else:
            check_section(name, "network", net, Network)
            rtt, jitter = float(net["rtt_ms"]), float(net.get("jitter_ms", 0.0))
            network = Network(rtt, jitter, str(net.get("name", "custom")))
        model = ModelSpec(**check_section(name, "model", p["model"], ModelSpec))
        check_model(name, model)
        return Profile(
            name=name,
            description=str(p["description"]),
            served_model_name=str(p["served_model_name"]),
            model=model,
            hardware=Hardware(**check_section(name, "hardware", p["hardware"], Hardware)),
            efficiency=_efficiency(name, check_section(name, "efficiency", p["efficiency"], Efficiency)),
            engine=_engine(check_section(name, "engine", p["engine"], EngineConfig)),
            network=network,
            calibration=str(p.get("calibration", "")),
            sources=tuple(str(s) for s in p.get("sources", ())),
            provenance=dict(p.get("provenance", {})),
        )
    except ProfileError:
        raise
    except (KeyError, TypeError) as e:
        raise ProfileError(f"profile {name!r}: missing or unknown field ({e})") from None
    except ValueError as e:
        raise ProfileError(str(e)) from None


def _efficiency(name: str, section: dict[str, Any]) -> Efficiency:
    """The efficiency section; every value a finite number, none below zero (a negative cost would
    make a step faster than nothing; mfu and mbu, shares, above zero)."""
    eff = Efficiency(**section)
    for f in fields(Efficiency):
        v = getattr(eff, f.name)
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v < 0:
            raise ProfileError(f"profile {name!r}: efficiency.{f.name} = {v!r} is not a number >= 0")
    if eff.mfu <= 0 or eff.mbu <= 0:
        raise ProfileError(f"profile {name!r}: efficiency.mfu and mbu must be above 0 (shares of the peak)")
    return eff


MAX_PREFILL_TABLE = 64  # lengths in a prefill table (a ladder has a handful)


def _engine(section: dict[str, Any]) -> EngineConfig:
    """The engine section; a TOML file's lists become tuples (a profile stays hashable)."""
    fixed: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in section.items()}
    n, ms = fixed.get("prefill_table_tokens", ()), fixed.get("prefill_table_ms", ())
    if len(n) != len(ms) or len(n) > MAX_PREFILL_TABLE:
        raise ProfileError(
            f"engine.prefill_table_tokens and _ms: {len(n)} and {len(ms)} values "
            f"(equal counts, at most {MAX_PREFILL_TABLE})"
        )
    return EngineConfig(**fixed)
