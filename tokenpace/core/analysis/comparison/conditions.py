"""Which test conditions differ between runs, and run-level numbers side by side. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# Fields that differ between any two runs by construction: not conditions of the measurement.
VOLATILE = frozenset(
    {
        "started_at",
        "clock",
        "request_id_prefix",
        "connections_opened",
        "served_models",
        "run_id",
    }
)

# Nested fields that differ by construction: the run's own prompt salt (its setting is compared).
VOLATILE_PATHS = frozenset({"workload.prompt_salt.text"})

RUN_LEVEL = (
    ("request_throughput", "requests/s", True),
    ("output_token_throughput", "output tok/s", True),
    ("total_token_throughput", "total tok/s", True),
    ("goodput", "goodput req/s", True),
    ("error_rate", "error rate", False),
)


def flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if (not prefix and key in VOLATILE) or name in VOLATILE_PATHS:
            continue
        if isinstance(value, Mapping):
            out.update(flatten(value, name + "."))
        else:
            out[name] = value
    return out


def differing_fields(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[tuple[str, Any, Any]]:
    """(field, value in A, value in B) for every condition that differs, dotted names, sorted."""
    fa, fb = flatten(a), flatten(b)
    out = []
    for name in sorted(set(fa) | set(fb)):
        va, vb = fa.get(name), fb.get(name)
        if va != vb:
            out.append((name, va, vb))
    return out


def run_level(summary_a: Mapping[str, Any], summary_b: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Whole-run numbers (one value per run, so no interval): A, B and B's relative change."""
    rows = []
    for key, title, higher_is_better in RUN_LEVEL:
        va, vb = summary_a.get(key), summary_b.get(key)
        if va is None and vb is None:
            continue
        rel = (vb - va) / va if isinstance(va, (int, float)) and isinstance(vb, (int, float)) and va else None
        rows.append(
            {"name": key, "title": title, "a": va, "b": vb, "rel": rel, "higher_is_better": higher_is_better}
        )
    return rows


def get_path(data: Mapping[str, Any], dotted: str) -> Any:
    """``get_path({"load": {"rate": 2}}, "load.rate") == 2``; None when absent."""
    cur: Any = data
    for part in dotted.split("."):
        if not isinstance(cur, Mapping) or part not in cur:
            return None
        cur = cur[part]
    return cur


HIT_RATE_GAP = 0.10  # prefix-cache hit rates further apart than this: one side ran warmer


def cache_warnings(
    cond_a: Mapping[str, Any], cond_b: Mapping[str, Any], sum_a: Mapping[str, Any], sum_b: Mapping[str, Any]
) -> list[str]:
    """Why two runs may not be comparable through the engine's prefix cache: a different prompt-salt
    setting (identical prompts can hit what an earlier run left cached), or hit rates that the
    server reported far apart."""
    out = []
    salt_a, salt_b = cond_a.get("prompt_salt", "none"), cond_b.get("prompt_salt", "none")
    if (salt_a == "none") != (salt_b == "none"):
        out.append(
            f"prompt salt differs (A {salt_a}, B {salt_b}): the unsalted side may have hit prompts an "
            "earlier run left in the engine's prefix cache"
        )
    rate_a = (sum_a.get("server") or {}).get("prefix_hit_rate")
    rate_b = (sum_b.get("server") or {}).get("prefix_hit_rate")
    if (
        isinstance(rate_a, (int, float))
        and isinstance(rate_b, (int, float))
        and abs(rate_a - rate_b) > HIT_RATE_GAP
    ):
        out.append(
            f"the engine's prefix-cache hit rate differs (A {rate_a:.2f}, B {rate_b:.2f}): one run was "
            "measured warmer than the other"
        )
    return out


# What a release gate holds fixed between baseline and candidate: what was asked of the server and
# how hard. Not where (endpoint), when, by whom (labels), nor how long (requests, duration).
GATE_FIELDS = ("model", "api", "stream", "load.", "workload.", "sampling.", "prompt_salt")
GATE_IGNORED = frozenset(
    {"load.requests", "load.duration_s", "load.warmup", "load.timeout_s", "workload.seed"}
)


def gate_mismatches(baseline: Mapping[str, Any], candidate: Mapping[str, Any]) -> list[str]:
    """The dotted condition fields that make ``candidate`` a different test from ``baseline``."""
    return [
        name
        for name, _, _ in differing_fields(baseline, candidate)
        if name.startswith(GATE_FIELDS) and name not in GATE_IGNORED
    ]
