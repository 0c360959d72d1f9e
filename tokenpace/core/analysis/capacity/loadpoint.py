"""One sweep step reduced to what capacity analysis needs, and why a step is left out of it. Pure.

A step is *left out* of every capacity figure (knee, max sustainable throughput, SLO ceiling,
watermark, replicas) when it has no successful request, when the client could not keep up (NOT
VALID), when it was interrupted, when it was too short to reach a steady state (see
``tokenpace.core.steady``), when Little's law calls it inconsistent (its rate and latency cannot
both be right: ``little``), or, predicted, when it lies past what its calibrated profile vouches for
(a slot limit not identified, prompts longer than calibrated, a fit that failed its quality gate). Its
row is still shown, with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tokenpace.core.stats import ci_from_json

LATENCY_KEYS = ("mean", "p50", "p90", "p95", "p99")


@dataclass(frozen=True, slots=True)
class LoadPoint:
    """One sweep step (latencies in ms)."""

    step: int  # 1-based
    mode: str  # closed_loop | open_loop
    offered: float | None  # concurrency (closed loop) or requests/s (open loop)
    max_concurrency: int | None
    achieved_rps: float  # ok requests per second of the steady window (else of the whole window)
    sent: int
    ok: int
    error_rate: float
    window_s: float
    goodput: float | None
    valid: bool  # the client kept up (client health)
    latency: dict[str, dict[str, float | None]] = field(default_factory=dict)  # metric -> p50/p95/...
    interrupted: bool = False
    short: bool = False  # no steady state worth the name (too short a step)
    short_reason: str = ""
    steady: bool = False  # achieved_rps comes from the steady window
    # what the SLO is judged on: open loop from the scheduled time, closed loop from the send
    slo_latency: dict[str, dict[str, float | None]] = field(default_factory=dict)
    slo_basis: str = "send"
    sent_rps: float | None = None  # requests actually sent per second (the schedule's realisation)
    slo_cis: dict[str, dict[str, tuple[float, float]]] = field(default_factory=dict)  # 95 % intervals
    # per metric: its count and, where requests moved together, each percentile's effective count
    slo_n_eff: dict[str, tuple[int, dict[str, float]]] = field(default_factory=dict)
    trend: dict[str, Any] | None = None  # latency against time inside the step (``drift``), if measured
    # a predicted step past what its (calibrated) profile vouches for: why (sim/profiles/limits.py)
    beyond_profile: str = ""
    steady_latency_ms: float | None = None  # mean E2E of the requests the steady rate rests on
    inconsistent: str = ""  # Little's law's note when the step fails it (set by ``plan.analyze``)

    def slo_ci(self, metric: str, p: str) -> tuple[float, float] | None:
        return (self.slo_cis.get(metric) or {}).get(p)

    def slo_effective(self, metric: str, p: str) -> tuple[int, float] | None:
        """(n, n_eff) where the percentile's requests moved together; None where independent."""
        n, effs = self.slo_n_eff.get(metric, (0, {}))
        return (n, effs[p]) if p in effs else None

    def pct(self, metric: str, p: str) -> float | None:
        return (self.latency.get(metric) or {}).get(p)

    def slo_pct(self, metric: str, p: str) -> float | None:
        return (self.slo_latency.get(metric) or self.latency.get(metric) or {}).get(p)

    @property
    def left_out_reasons(self) -> list[str]:
        reasons = []
        if not self.ok:
            reasons.append("no successful request")
        if not self.valid:
            reasons.append("client NOT VALID")
        if self.interrupted:
            reasons.append("interrupted")
        if self.short:
            reasons.append(f"short ({self.short_reason})" if self.short_reason else "short")
        if self.beyond_profile:
            reasons.append(f"predicted past what its profile vouches for ({self.beyond_profile})")
        if self.inconsistent:
            reasons.append(f"inconsistent with Little's law ({self.inconsistent})")
        return reasons

    @property
    def usable(self) -> bool:
        return not self.left_out_reasons


def _dists(s: dict[str, Any], names: dict[str, str]) -> dict[str, dict[str, float | None]]:
    return {m: {k: (s.get(src) or {}).get(k) for k in LATENCY_KEYS} for m, src in names.items()}


def _cis(s: dict[str, Any], names: dict[str, str]) -> dict[str, dict[str, tuple[float, float]]]:
    out: dict[str, dict[str, tuple[float, float]]] = {}
    for metric, src in names.items():
        cis = (s.get(src) or {}).get("ci95") or {}
        # a side the run cannot bound (None) is infinite: it never holds a line
        out[metric] = {k: ci for k, v in cis.items() if (ci := ci_from_json(v)) is not None}
    return out


def _n_effs(s: dict[str, Any], names: dict[str, str]) -> dict[str, tuple[int, dict[str, float]]]:
    out: dict[str, tuple[int, dict[str, float]]] = {}
    for metric, src in names.items():
        d = s.get(src) or {}
        effs = d.get("n_eff") or {}
        out[metric] = (int(d.get("n") or 0), {k: float(v) for k, v in effs.items()})
    return out


def point_from_result(step: int, result: dict[str, Any]) -> LoadPoint:
    """A step in the ``bench --out`` format as a load point (older files without a steady window or
    client block are read as they were: whole-window throughput, ``valid`` as stored)."""
    load = result["conditions"]["load"]
    s = result["summary"]
    closed = load["mode"] == "closed_loop"
    counts = s.get("counts") or {}
    lat = _dists(s, {m: m for m in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms")})
    names = {m: m for m in ("ttft_ms", "tpot_ms", "e2e_ms")}
    basis = "send"
    if not closed and (s.get("ttft_from_scheduled_ms") or {}).get("n"):
        names = {"ttft_ms": "ttft_from_scheduled_ms", "tpot_ms": "tpot_ms", "e2e_ms": "e2e_from_scheduled_ms"}
        basis = "scheduled"
    slo_lat = _dists(s, names)
    steady = s.get("steady") or {}
    steady_rps = steady.get("request_throughput")
    use_steady = steady_rps is not None and not steady.get("short")
    rps = steady_rps if use_steady else s.get("request_throughput")
    window = steady.get("window_s") if use_steady else s.get("window_s")
    client = s.get("client") or {}
    return LoadPoint(
        step=step,
        mode=load["mode"],
        offered=load["concurrency"] if closed else load["rate"],
        max_concurrency=load.get("max_concurrency"),
        achieved_rps=float(rps or 0.0),
        sent=int(counts.get("sent", 0)),
        ok=int(counts.get("ok", 0)),
        error_rate=float(s.get("error_rate") or 0.0),
        window_s=float(window or 0.0),
        goodput=s.get("goodput"),
        valid=bool(client.get("valid", result.get("valid", True))),
        latency=lat,
        interrupted=bool(result.get("interrupted", False)),
        short=bool(steady.get("short", False)),
        short_reason=str(steady.get("short_reason") or ""),
        steady=use_steady,
        slo_latency=slo_lat,
        slo_basis=basis,
        sent_rps=steady.get("send_rate"),
        slo_cis=_cis(s, names),
        slo_n_eff=_n_effs(s, names),
        trend=result.get("time_trend"),
        beyond_profile=str(result.get("beyond_profile") or ""),
        steady_latency_ms=_ms(steady.get("mean_latency_s")) if use_steady else None,
    )


def _ms(seconds: Any) -> float | None:
    return float(seconds) * 1000 if isinstance(seconds, (int, float)) else None
