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
        if not prefix and key in VOLATILE:
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
