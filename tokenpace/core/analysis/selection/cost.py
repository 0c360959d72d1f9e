"""What a candidate costs, which one to pick, and a tiered-routing estimate. Pure.

- API price: a request costs its measured mean input tokens x the input price plus its mean output
  tokens x the output price (per million tokens).
- Hourly price (hardware): a replica is paid by the hour and carries, while meeting every line, the
  goodput the measurement showed (``Verdict.capacity_good_rps``); a request costs the hourly price
  divided by 3,600 x that goodput. Failed or slow requests are paid for and bring nothing.
- Per million output tokens = cost per request / mean output tokens x 10^6; per thousand requests =
  cost per request x 1,000.
- The cheapest passing candidate is recommended (by cost per thousand requests), with its margin to
  the line; without prices, the passing one with the largest margin.
- Tiered routing: a share of the requests (the simple ones) goes to a smaller candidate, the rest to
  a larger one. The blended percentile is the percentile of the mixture of both measured
  distributions (each weighted by its share); the cost is the shares' weighted cost.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tokenpace.core.analysis.selection.scenarios import Prices, Scenario
from tokenpace.core.analysis.selection.select import Verdict
from tokenpace.core.metrics import NS_PER_MS, e2e_ns, itl_gaps_ns, tpot_ns, ttft_ns
from tokenpace.core.record import RequestRecord, Status


@dataclass(frozen=True, slots=True)
class Cost:
    per_request: float
    per_k_requests: float
    per_mtok_output: float | None
    basis: str  # how it was computed

    def to_dict(self) -> dict[str, Any]:
        return {"per_request": self.per_request, "per_k_requests": self.per_k_requests,
                "per_mtok_output": self.per_mtok_output, "basis": self.basis}  # fmt: skip


def cost_of(prices: Prices, verdict: Verdict) -> Cost | str:
    """The candidate's cost, or why there is none."""
    if not verdict.placement.trusted:
        return "not costed: no numbers at the scenario's load"
    vals = verdict.placement.values
    out_tokens, in_tokens = vals.get("output_tokens"), vals.get("prompt_tokens")
    if prices.hourly is not None:
        good = verdict.capacity_good_rps
        if not good:
            return "no goodput at the scenario's lines: an hourly price buys nothing here"
        per_request = prices.hourly / 3600 / good
        basis = f"${prices.hourly:g}/h over {good:.3g} good req/s"
    else:
        if out_tokens is None or in_tokens is None:
            return "no token counts at the scenario's load"
        per_request = (
            in_tokens * (prices.input_per_mtok or 0) + out_tokens * (prices.output_per_mtok or 0)
        ) / 1e6
        basis = f"${prices.input_per_mtok or 0:g} in / ${prices.output_per_mtok or 0:g} out per Mtok"
    per_mtok = per_request / out_tokens * 1e6 if out_tokens else None
    return Cost(per_request, per_request * 1000, per_mtok, basis)


@dataclass(frozen=True, slots=True)
class Recommendation:
    candidate: str | None
    reason: str
    margin: float | None

    def to_dict(self) -> dict[str, Any]:
        return {"candidate": self.candidate, "reason": self.reason, "margin": self.margin}


def recommend(verdicts: Sequence[Verdict], costs: Mapping[str, Cost | str]) -> Recommendation:
    passing = [v for v in verdicts if v.status == "pass"]
    if not passing:
        return Recommendation(None, "no candidate passes every line at the scenario's load", None)
    priced = [(c.per_k_requests, v) for v in passing if isinstance(c := costs.get(v.candidate), Cost)]
    if priced:
        cost, best = min(priced, key=lambda cv: cv[0])
        return Recommendation(best.candidate, f"cheapest passing: ${cost:.4g} per 1k requests", best.margin)
    best = max(passing, key=lambda v: v.margin if v.margin is not None else -1.0)
    return Recommendation(
        best.candidate, "no prices given: the passing one furthest under the line", best.margin
    )


# --- per-request samples and tiered routing --------------------------------------------------


def _from_scheduled(get: Callable[[RequestRecord], int | None]) -> Callable[[RequestRecord], int | None]:
    """The same latency counted from when the schedule wanted the request sent (open loop)."""

    def shifted(r: RequestRecord) -> int | None:
        v = get(r)
        return None if v is None else v + (r.sent_ns - r.scheduled_ns)

    return shifted


def meets_lines(r: RequestRecord, scenario: Scenario, from_scheduled: bool = False) -> bool:
    """A request meets the scenario when it succeeded and its TTFT, TPOT and E2E are within every
    line naming them (ITL lines are about gaps across requests, not one request: not counted).
    ``from_scheduled`` (open loop): TTFT and E2E count from the scheduled send time."""
    if r.status is not Status.OK:
        return False
    getters: dict[str, Callable[[RequestRecord], Any]] = {"ttft": ttft_ns, "tpot": tpot_ns, "e2e": e2e_ns}
    if from_scheduled:
        getters |= {"ttft": _from_scheduled(ttft_ns), "e2e": _from_scheduled(e2e_ns)}
    for line in scenario.slos:
        get = getters.get(line.metric)
        value = get(r) if get is not None else None
        if value is not None and value > line.threshold_ms * NS_PER_MS:
            return False
        if value is None and line.metric in ("ttft", "e2e"):
            return False
    return True


def count_meeting(records: Iterable[RequestRecord], scenario: Scenario, from_scheduled: bool = False) -> int:
    """Measured (sent, not warm-up) requests meeting every line."""
    return sum(1 for r in records if not r.warmup and r.sent_ns and meets_lines(r, scenario, from_scheduled))


def metric_samples(records: Iterable[RequestRecord], from_scheduled: bool = False) -> dict[str, list[float]]:
    """Per-metric samples in ms of the successful measured requests (ITL: every gap)."""
    out: dict[str, list[float]] = {"ttft_ms": [], "tpot_ms": [], "e2e_ms": [], "itl_ms": []}
    ttft, e2e = (_from_scheduled(ttft_ns), _from_scheduled(e2e_ns)) if from_scheduled else (ttft_ns, e2e_ns)
    for r in records:
        if r.warmup or not r.sent_ns or r.status is not Status.OK:
            continue
        for key, get in (("ttft_ms", ttft), ("tpot_ms", tpot_ns), ("e2e_ms", e2e)):
            v = get(r)
            if v is not None:
                out[key].append(v / NS_PER_MS)
        out["itl_ms"].extend(g / NS_PER_MS for g in itl_gaps_ns(r))
    return out


def mixture_percentile(a: Sequence[float], b: Sequence[float], share_a: float, q: float) -> float | None:
    """The q-quantile (0-1) of a mixture drawing from ``a`` with probability ``share_a``."""
    weighted = [(v, share_a / len(a)) for v in a] if a else []
    weighted += [(v, (1 - share_a) / len(b)) for v in b] if b else []
    if not weighted:
        return None
    total = sum(w for _, w in weighted)
    acc = 0.0
    for v, w in sorted(weighted):
        acc += w / total
        if acc >= q - 1e-12:
            return v
    return max(v for v, _ in weighted)


@dataclass(frozen=True, slots=True)
class TierEstimate:
    small: str
    large: str
    share: float  # of requests sent to the small candidate
    lines: list[dict[str, Any]]  # line, blended value, passes (point estimate)
    per_k_requests: float | None
    per_mtok_output: float | None

    def to_dict(self) -> dict[str, Any]:
        return {"small": self.small, "large": self.large, "share_small": self.share, "lines": self.lines,
                "per_k_requests": self.per_k_requests, "per_mtok_output": self.per_mtok_output}  # fmt: skip


def tiered(
    scenario: Scenario,
    share: float,
    small: tuple[Verdict, Mapping[str, list[float]], Cost | str | None],
    large: tuple[Verdict, Mapping[str, list[float]], Cost | str | None],
) -> TierEstimate:
    """Blended latency per line and blended cost when ``share`` of requests go to ``small``."""
    (sv, s_samples, s_cost), (lv, l_samples, l_cost) = small, large
    lines = []
    for line in scenario.slos:
        q = int(line.percentile[1:]) / 100
        value = mixture_percentile(s_samples.get(line.key, []), l_samples.get(line.key, []), share, q)
        ok = value is not None and value < line.threshold_ms
        lines.append({"line": line.label(), "blended": value, "passes": ok})
    per_k = per_mtok = None
    if isinstance(s_cost, Cost) and isinstance(l_cost, Cost):
        per_request = share * s_cost.per_request + (1 - share) * l_cost.per_request
        per_k = per_request * 1000
        s_out = sv.placement.values.get("output_tokens") or 0.0
        l_out = lv.placement.values.get("output_tokens") or 0.0
        out = share * s_out + (1 - share) * l_out
        per_mtok = per_request / out * 1e6 if out else None
    return TierEstimate(sv.candidate, lv.candidate, share, lines, per_k, per_mtok)


def pareto_front(points: Sequence[tuple[str, float, float]]) -> list[str]:
    """Names of the points (name, latency, cost) no other point beats on both, cheapest last."""
    front = []
    for name, x, y in points:
        beaten = any((x2 <= x and y2 <= y) and (x2 < x or y2 < y) for _, x2, y2 in points)
        if not beaten:
            front.append((x, name))
    return [name for _, name in sorted(front)]
