"""How much an engine's step times vary, from requests decoding alone (a calibration's step-noise fit).

Pure. The simulator multiplies every step by a lognormal factor of mean 1, its log an
Ornstein-Uhlenbeck process of standard deviation sigma and correlation time `hold` (tokenpace.sim.
step_noise). A request whose decode phase overlapped no other request's time in flight saw its own
steps only, so:

- with per-token timestamps (the client's records keep them), sigma is the spread of one step: the
  log of each inter-token gap over its group's median gap (group: load and prompt length), robust
  (1.4826 x MAD, so a client read that joined two tokens does not count);
- the spread of those requests' time per output token (the mean of m steps, same normalisation) says
  how long a slow stretch lasts: independent steps would shrink it by sqrt(m), fully correlated ones
  not at all; the step correlation rho between them solves var(mean of m) / sigma^2 = f(rho), and
  hold = -gap / ln(rho);
- without timestamps (a virtual run's records) only the second is there: steps are taken as
  independent (hold 0) and sigma = the TPOT spread x sqrt(m).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tokenpace.core.analysis.calibration.engine_costs import Param
from tokenpace.core.analysis.calibration.engine_obs import MeasuredLoad, prompt_of, usable
from tokenpace.core.metrics import NS_PER_S
from tokenpace.core.stats import robust_sd

MIN_REQUESTS = 10  # requests decoding alone, in groups of MIN_GROUP or more, before a spread is trusted
MIN_GROUP = 5
MIN_GAPS = 8  # inter-token gaps per request for its per-step spread
RHO_MAX = 0.999  # a step correlation past this is a drift over the whole run, not step noise


@dataclass(frozen=True, slots=True)
class NoiseFit:
    cv: float  # of a step's duration
    hold_s: float  # correlation time of its log (0: independent steps)
    sigma: float  # of the factor's log
    params: tuple[Param, Param]


@dataclass(slots=True)
class _Alone:
    group: tuple[str, int]
    tpot_s: float
    steps: int  # output tokens - 1
    gaps_s: np.ndarray | None  # inter-token gaps, where every token had its own timestamp


def _alone_decoders(loads: Sequence[MeasuredLoad]) -> list[_Alone]:
    out = []
    for ld in loads:
        ok = usable(ld.records)
        sent = np.asarray([r.sent_ns for r in ok], dtype=np.int64)
        end = np.asarray([r.end_ns or 0 for r in ok], dtype=np.int64)
        for i, r in enumerate(ok):
            first = r.first_token_ns or 0
            others = (sent < end[i]) & (end > first)
            others[i] = False
            if others.any():
                continue
            steps = r.output_tokens - 1
            gaps = None
            if len(r.token_ns) == r.output_tokens >= MIN_GAPS + 1 and not r.token_ns_dropped:
                gaps = np.diff(np.asarray(r.token_ns, dtype=np.int64)) / NS_PER_S
            tpot = (end[i] - first) / NS_PER_S / steps
            out.append(_Alone((ld.label, prompt_of(r)), tpot, steps, gaps))
    return out


def _log_ratios(alone: list[_Alone]) -> tuple[np.ndarray, np.ndarray, float]:
    """(log TPOT over its group's median, log gap over its group's median gap, median gap s)."""
    by: dict[tuple[str, int], list[_Alone]] = defaultdict(list)
    for a in alone:
        by[a.group].append(a)
    tpots, gaps, typical = [], [], []
    for members in by.values():
        if len(members) < MIN_GROUP:
            continue
        t = np.log([a.tpot_s for a in members])
        tpots.append(t - np.median(t))
        g = [a.gaps_s for a in members if a.gaps_s is not None]
        if len(g) >= MIN_GROUP:
            flat = np.concatenate(g)
            flat = flat[flat > 0]
            med = float(np.median(flat))
            gaps.append(np.log(flat / med))
            typical.append(med)
    return (
        np.concatenate(tpots) if tpots else np.zeros(0),
        np.concatenate(gaps) if gaps else np.zeros(0),
        float(np.median(typical)) if typical else 0.0,
    )


def mean_variance_ratio(rho: float, m: int) -> float:
    """var(mean of m steps) / var(one step) for an AR(1) correlation rho between steps."""
    k = np.arange(1, m)
    return (1.0 + 2.0 * float(((1.0 - k / m) * rho**k).sum())) / m


def _solve_rho(ratio: float, m: int) -> float:
    lo, hi = 0.0, RHO_MAX
    if ratio <= mean_variance_ratio(lo, m):
        return 0.0
    if ratio >= mean_variance_ratio(hi, m):
        return hi
    for _ in range(60):  # bisection: f rises with rho
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if mean_variance_ratio(mid, m) < ratio else (lo, mid)
    return 0.5 * (lo + hi)


def fit_step_noise(loads: Sequence[MeasuredLoad]) -> NoiseFit:
    alone = _alone_decoders(loads)
    tpot_logs, gap_logs, gap_s = _log_ratios(alone)
    if len(tpot_logs) < MIN_REQUESTS:
        why = (
            f"fewer than {MIN_REQUESTS} requests decoded alone in groups of {MIN_GROUP} (same load, same "
            "prompt length): no spread measured, steps kept exact (sweep concurrency 1 with -n 10 or more)"
        )
        return _fit(0.0, 0.0, False, why, "no step spread measured")
    m = round(float(np.median([a.steps for a in alone])))
    sd_req = robust_sd(tpot_logs)
    n_req = len(tpot_logs)
    if len(gap_logs) >= MIN_REQUESTS * MIN_GAPS and gap_s > 0:
        sigma = robust_sd(gap_logs)
        rho = _solve_rho((sd_req / sigma) ** 2 if sigma > 0 else 0.0, m) if sigma > 0 else 0.0
        hold = -gap_s / math.log(rho) if rho > 0 else 0.0
        how = (
            f"spread of {len(gap_logs)} inter-token gaps of {n_req} requests decoding alone (1.4826 x MAD "
            f"of log gap / median)"
        )
        how_hold = (
            f"their time per output token spreads {sd_req:.3g} in log over {m} steps, "
            + (
                "no more than independent steps give"
                if rho == 0
                else f"as steps correlated {rho:.3g} from one to the next ({gap_s * 1e3:.3g} ms apart) give"
            )
            + (" (capped: a drift over the whole run)" if rho >= RHO_MAX else "")
        )
        return _fit(sigma, hold, True, how, how_hold)
    sigma = sd_req * math.sqrt(m)
    how = (
        f"spread of the time per output token of {n_req} requests decoding alone, x sqrt({m} steps): "
        "no per-token timestamps, so steps are taken as independent"
    )
    return _fit(sigma, 0.0, True, how, "no per-token timestamps: independent steps assumed")


def _fit(sigma: float, hold: float, identified: bool, how: str, how_hold: str) -> NoiseFit:
    cv = math.sqrt(math.expm1(sigma * sigma))
    return NoiseFit(
        cv,
        hold,
        sigma,
        (
            Param("step_cv", cv, "", identified, how),
            Param("step_cv_hold", hold * 1e3, "ms", identified and hold > 0, how_hold),
        ),
    )
