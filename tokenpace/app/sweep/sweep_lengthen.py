"""Short sweep steps: how fast a step really ran, and how much longer a short one must run.

A step is *short* when its steady window (``tokenpace.core.steady``) is too small a part of it; its
throughput is then ramp-up and drain more than load. ``sweep --auto`` reruns such a step with more
requests (the factor follows from the ramp-up and drain it measured), at most ``MAX_RERUNS`` times
and ``MAX_TOTAL_FACTOR`` times its first length; a step still short after that stays on the curve,
flagged, and is left out of the knee and the plan.
"""

from __future__ import annotations

import dataclasses

from tokenpace.app.run.bench_config import BenchConfig, BenchResult
from tokenpace.core.steady import SteadyState, lengthen_factor, steady_state

MAX_RERUNS = 2
MAX_TOTAL_FACTOR = 16


def steady_of(result: BenchResult) -> SteadyState:
    cfg_load = result.conditions.get("load") or {}
    closed = cfg_load.get("mode") == "closed_loop"
    return steady_state(result.records, cfg_load.get("concurrency") if closed else None)


def is_short(result: BenchResult) -> bool:
    return bool((result.summary.extra.get("steady") or {}).get("short"))


def step_rps(result: BenchResult) -> float:
    """Throughput over the steady window when there is one, else over the whole run."""
    steady = result.summary.extra.get("steady") or {}
    rps = steady.get("request_throughput")
    if rps is not None and not steady.get("short"):
        return float(rps)
    return result.summary.request_throughput


def lengthened(cfg: BenchConfig, result: BenchResult, so_far: int) -> tuple[BenchConfig, int] | None:
    """The step's config with more requests (or a longer duration), and the total factor; None when
    it may not grow further."""
    if so_far >= MAX_TOTAL_FACTOR:
        return None
    factor = min(lengthen_factor(steady_of(result)), MAX_TOTAL_FACTOR // so_far)
    if factor < 2:
        return None
    requests = cfg.requests * factor if cfg.requests else None
    duration = cfg.duration_s * factor if cfg.duration_s else None
    return dataclasses.replace(cfg, requests=requests, duration_s=duration), so_far * factor
