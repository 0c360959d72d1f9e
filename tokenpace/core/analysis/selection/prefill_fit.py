"""The input-length gradient: a linear fit of TTFT on input tokens, and a candidate moved with it.

Pure. At a fixed low load (nothing queued), TTFT ~ fixed + slope x input tokens: the slope is the
prefill time per token (reported per 1,000 tokens), the fixed part the per-request overhead
(scheduling, the first decode step, the network). Ordinary least squares over every successful
request of an input-length sweep, with 95 % intervals from the coefficients' standard errors
(Student t with n - 2 degrees of freedom, through its normal approximation for n > 30).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from tokenpace.core.analysis.selection.select import Placement
from tokenpace.core.metrics import NS_PER_MS, ttft_ns
from tokenpace.core.record import RequestRecord, Status

# two-sided 97.5 % quantiles of Student t for small degrees of freedom; 1.96 beyond 30
_T975 = {1: 12.71, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228,
         15: 2.131, 20: 2.086, 30: 2.042}  # fmt: skip


def _t975(df: int) -> float:
    if df > 30:
        return 1.96
    return _T975[min(k for k in _T975 if k >= df)]


@dataclass(frozen=True, slots=True)
class PrefillFit:
    ms_per_1k: float  # prefill milliseconds per 1,000 input tokens
    ms_per_1k_ci: tuple[float, float]
    fixed_ms: float
    fixed_ms_ci: tuple[float, float]
    n: int
    r2: float
    input_range: tuple[float, float]  # the input lengths the fit saw

    def ttft_at(self, tokens: float) -> float:
        return self.fixed_ms + self.ms_per_1k * tokens / 1000

    def to_dict(self) -> dict[str, Any]:
        return {
            "ms_per_1k_tokens": self.ms_per_1k,
            "ms_per_1k_tokens_ci95": list(self.ms_per_1k_ci),
            "fixed_ms": self.fixed_ms,
            "fixed_ms_ci95": list(self.fixed_ms_ci),
            "n": self.n,
            "r2": self.r2,
            "input_tokens_range": list(self.input_range),
        }


def fit_ttft(tokens: Sequence[float], ttft_ms: Sequence[float]) -> PrefillFit:
    """OLS of TTFT (ms) on input tokens; ValueError when the lengths do not vary or n < 3."""
    x, y = np.asarray(tokens, dtype=float), np.asarray(ttft_ms, dtype=float)
    n = len(x)
    if n < 3 or len(y) != n:
        raise ValueError("a TTFT fit needs at least 3 requests")
    sxx = float(((x - x.mean()) ** 2).sum())
    if sxx <= 0:
        raise ValueError("a TTFT fit needs more than one input length")
    slope = float(((x - x.mean()) * (y - y.mean())).sum() / sxx)
    fixed = float(y.mean() - slope * x.mean())
    resid = y - (fixed + slope * x)
    sse = float((resid**2).sum())
    sst = float(((y - y.mean()) ** 2).sum())
    s2 = sse / (n - 2) if n > 2 else 0.0
    se_slope = (s2 / sxx) ** 0.5
    se_fixed = (s2 * (1 / n + x.mean() ** 2 / sxx)) ** 0.5
    t = _t975(n - 2)
    return PrefillFit(
        ms_per_1k=slope * 1000,
        ms_per_1k_ci=((slope - t * se_slope) * 1000, (slope + t * se_slope) * 1000),
        fixed_ms=fixed,
        fixed_ms_ci=(fixed - t * se_fixed, fixed + t * se_fixed),
        n=n,
        r2=1 - sse / sst if sst > 0 else 1.0,
        input_range=(float(x.min()), float(x.max())),
    )


def fit_records(records: Iterable[RequestRecord]) -> PrefillFit:
    """The fit over the successful measured requests (server prompt count when reported)."""
    xs, ys = [], []
    for r in records:
        t = ttft_ns(r)
        if r.warmup or not r.sent_ns or r.status is not Status.OK or t is None:
            continue
        tokens = r.prompt_tokens if r.prompt_tokens is not None else r.prompt_tokens_requested
        if tokens:
            xs.append(float(tokens))
            ys.append(t / NS_PER_MS)
    return fit_ttft(xs, ys)


def move_to_input_len(at: Placement, fit: PrefillFit, input_len: int, source: str) -> Placement:
    """The candidate's TTFT and E2E moved from its measured input length to the scenario's by the
    fit's slope; the upper bounds move by the slope's bound on the unfavourable side."""
    measured = at.values.get("prompt_tokens")
    if not at.trusted or measured is None:
        return at
    delta_k = (input_len - measured) / 1000
    if abs(delta_k) < 1e-9:
        return at
    lo, hi = fit.ms_per_1k_ci
    worst = (hi if delta_k > 0 else lo) * delta_k
    shift = fit.ms_per_1k * delta_k
    values = dict(at.values)
    for key in list(values):
        if key.startswith(("ttft_ms.", "e2e_ms.")):
            values[key] += worst if key.endswith(".hi") else shift  # (.lo moves with the estimate)
    values["prompt_tokens"] = float(input_len)
    where = (
        f"{at.where}; TTFT and E2E moved from ~{measured:.0f} to {input_len} input tokens by the "
        f"prefill fit of {source} ({fit.ms_per_1k:.3g} ms per 1k tokens: {shift:+.3g} ms)"
    )
    return replace(at, values=values, where=where)
