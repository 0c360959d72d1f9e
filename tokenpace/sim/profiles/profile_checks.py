"""Every value of a profile checked before the engine model sees it: its kind (a whole number, a
number, a flag, text), finite, and within the range below (an engine a profile can describe, with
room to spare). A profile file past any of them is refused with one line naming the section, the
field and its range: never a division by zero, an infinite cost or a wait of years downstream."""

from __future__ import annotations

import math
from dataclasses import fields
from typing import Any

INT, NUM, FLAG, TEXT, NUMS = "a whole number", "a number", "true or false", "text", "a list of numbers"
BIG = 1e9  # the ceiling of a count or a time that has no tighter natural one
# (section, field) -> (kind, lowest, highest); a field left out is the section's text or optional.
RANGES: dict[tuple[str, str], tuple[str, float, float]] = {
    # a calibrated profile's model is an effective one (sim/profiles/calibrated.py): a part may be 0
    ("model", "params_b"): (NUM, 0, 1e5),  # billions: up to 100 T parameters
    ("model", "layers"): (INT, 1, 1e4),
    ("model", "hidden"): (INT, 0, 1e12),
    ("model", "kv_heads"): (INT, 1, 1e5),
    ("model", "head_dim"): (INT, 1, 1e5),
    ("model", "weight_bytes"): (NUM, 0, 1e6),
    ("model", "kv_bytes"): (NUM, 0, 1e12),
    ("model", "active_params_b"): (NUM, 0, 1e5),
    ("model", "expert_params_b"): (NUM, 0, 1e5),
    ("model", "experts"): (INT, 0, 1e5),
    ("model", "top_k"): (INT, 0, 1e5),
    ("hardware", "name"): (TEXT, 0, 0),
    ("hardware", "gpus"): (INT, 1, 1e5),
    ("hardware", "mem_gb"): (NUM, 0, 1e6),
    ("hardware", "mem_bw_gbs"): (NUM, 1e-3, BIG),
    ("hardware", "tflops"): (NUM, 1e-6, BIG),
    ("engine", "block_size"): (INT, 1, 1e6),
    ("engine", "gpu_memory_utilization"): (NUM, 1e-3, 1),
    ("engine", "max_num_seqs"): (INT, 1, 1e7),
    ("engine", "max_num_batched_tokens"): (INT, 1, BIG),
    ("engine", "chunked_prefill"): (FLAG, 0, 0),
    ("engine", "long_prefill_token_threshold"): (INT, 0, BIG),
    ("engine", "prefix_caching"): (FLAG, 0, 0),
    ("engine", "max_model_len"): (INT, 1, BIG),
    ("engine", "eos_prob"): (NUM, 0, 1),
    ("engine", "num_gpu_blocks"): (INT, 0, 1e12),
    ("engine", "reasoning_tokens"): (INT, 0, BIG),
    ("engine", "tokens_per_chunk"): (INT, 1, 1e6),
    ("engine", "usage_every_chunk"): (FLAG, 0, 0),
    ("engine", "step_cv"): (NUM, 0, 100),
    ("engine", "step_cv_hold_ms"): (NUM, 0, BIG),
    ("engine", "prefill_table_tokens"): (NUMS, 0, BIG),
    ("engine", "prefill_table_ms"): (NUMS, 0, BIG),
    ("network", "rtt_ms"): (NUM, 0, 1e6),
    ("network", "jitter_ms"): (NUM, 0, 1e6),
}
EFFICIENCY_MAX = 1e6  # ms, µs, ns or a share: every efficiency value (none may be below 0)


def check_section(profile: str, section: str, values: Any, known: type) -> dict[str, Any]:
    """The section's values, each of its kind and within its range; ProfileError-like ValueError
    (one line) otherwise. ``known``: the section's dataclass (its field names)."""
    if not isinstance(values, dict):
        raise ValueError(f"profile {profile!r}: [{section}] must be a table")
    names = {f.name for f in fields(known)}
    for key, value in values.items():
        if key not in names:
            known_names = ", ".join(sorted(names))
            raise ValueError(f"profile {profile!r}: {section}.{key} is not a field ({known_names})")
        rule = RANGES.get((section, key))
        if section == "efficiency":
            rule = (NUM, 0, EFFICIENCY_MAX)
        if rule is None or (value is None and key in ("active_params_b", "num_gpu_blocks")):
            continue
        problem = _problem(value, *rule)
        if problem:
            raise ValueError(f"profile {profile!r}: {section}.{key} = {_shown(value)} {problem}")
    return values


def check_model(profile: str, model: Any) -> None:
    """What holds between the model's fields (the experts' part is never more than the whole; the
    active parameters may be: an effective model's are a compute price, calibrated.py)."""
    if model.expert_params_b > model.params_b:
        raise ValueError(f"profile {profile!r}: model.expert_params_b is above params_b")
    if model.top_k > model.experts:
        raise ValueError(f"profile {profile!r}: model.top_k is above experts")


def _problem(value: Any, kind: str, lo: float, hi: float) -> str:
    if kind == TEXT:
        fits = isinstance(value, str) and len(value) <= 1000
        return "" if fits else "is not text (1000 characters at most)"
    if kind == FLAG:
        return "" if isinstance(value, bool) else "is not true or false"
    if kind == NUMS:
        if not isinstance(value, list | tuple) or len(value) > 1000:
            return "is not a list of numbers (1000 at most)"
        return next((f"holds {_shown(v)}: {p}" for v in value if (p := _problem(v, NUM, lo, hi))), "")
    whole = kind == INT
    if isinstance(value, bool) or not isinstance(value, int if whole else int | float):
        return f"is not {kind}"
    if not lo <= value <= hi or not math.isfinite(value):  # range first: an int of any size compares
        return f"is not {kind} from {lo:g} to {hi:g}"
    return ""


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
