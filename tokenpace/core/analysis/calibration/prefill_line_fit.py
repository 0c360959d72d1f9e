"""The prefill's law from requests alone in flight: TTFT against the prompt length. Pure.

TTFT = I + a n (+ p n(n+1)/2) over the ladder, with a flat floor at the short end where the prefill
is memory-bound (its level gives the weights' time W); a constant where the ladder shows no prefill
cost. Step 1 of engine_fit.
"""

from __future__ import annotations

import numpy as np

from tokenpace.core.analysis.calibration.engine_costs import Linear, Param, Prefill, groups, significant, wls
from tokenpace.core.analysis.calibration.engine_obs import PrefillObs


def fit_prefill(obs: list[PrefillObs]) -> Prefill:
    if not obs:
        raise ValueError(
            "no request was alone in flight: calibration needs a low-load step (concurrency 1, or a "
            "low rate) to see the prefill"
        )
    g = np.asarray(groups([((o.prompt_tokens,), o.prompt_tokens, o.ttft_s) for o in obs]))
    n, t, w = g[:, 0], g[:, 1], g[:, 2]
    n_range = (float(n.min()), float(n.max()))
    if len(n) < 2 or n.max() < 1.5 * n.min():
        why = "needs an input-length ladder (prompts differing by 1.5x or more); TTFT kept as a constant"
        return _constant_prefill(g, why)
    order = np.argsort(n)
    n, t, w = n[order], t[order], w[order]
    best = _line_after(n, t, w, 0)
    for j in range(1, len(n) - 1):  # j shortest prompts on the memory-bound floor
        cand = _line_after(n, t, w, j)
        if cand is not None and best is not None and cand[3] < 0.5 * best[3]:
            best = cand
    if best is None:  # TTFT did not grow with the prompt: nothing here prefills like an engine
        why = (
            f"TTFT did not grow with the prompt over {n_range[0]:.0f}-{n_range[1]:.0f} tokens: no prefill "
            "cost seen (a server that does not prefill like an engine?); TTFT kept as a constant"
        )
        return _constant_prefill(g, why)
    intercept, per_token, per_pair, _, plateau, with_pairs = best
    notes = {
        "prefill_per_token": Param(
            "prefill_per_token", per_token * 1e6, "ms/1k tokens", True,
            f"slope of TTFT over {n_range[0]:.0f}-{n_range[1]:.0f}-token prompts, requests alone in flight",
        ),
        "attention_per_pair": Param(
            "attention_per_pair", per_pair * 1e9, "ns/pair", with_pairs,
            "curvature of TTFT over the ladder" if with_pairs
            else "no significant curvature of TTFT over the ladder (attention cost folded into the slope)",
        ),
    }  # fmt: skip
    return Prefill(
        intercept, per_token, per_pair, plateau, notes, n_range, [tuple(row) for row in g.tolist()]
    )


def _constant_prefill(g: np.ndarray, why: str) -> Prefill:
    """TTFT as one constant (its weighted mean) where the data identify no prefill cost."""
    n, t, w = g[:, 0], g[:, 1], g[:, 2]
    return Prefill(
        float(np.average(t, weights=w)),
        0.0,
        0.0,
        None,
        {"prefill_per_token": Param("prefill_per_token", 0.0, "ms/1k tokens", False, why)},
        (float(n.min()), float(n.max())),
        [tuple(row) for row in g.tolist()],
    )


def _line_after(
    n: np.ndarray, t: np.ndarray, w: np.ndarray, j: int
) -> tuple[float, float, float, float, float | None, bool] | None:
    """TTFT = I + a n (+ p pairs) on prompts j.., a flat floor before; (I, a, p, sse, floor, pairs).

    A floor must leave a line of three lengths or more and sit clearly above that line's extension
    (three residual deviations, and 2 %), so noise at the short end is not taken for one; the
    curvature p needs four lengths and a significant coefficient."""
    nn, tt, ww = n[j:], t[j:], w[j:]
    if len(nn) < (3 if j else 2) or nn.max() < 1.5 * nn.min():
        return None
    pairs = nn * (nn + 1) / 2
    with_pairs = False
    fit = wls(np.column_stack([np.ones_like(nn), nn]), tt, ww)
    if len(nn) >= 4:
        quad = wls(np.column_stack([np.ones_like(nn), nn, pairs]), tt, ww)
        # A line that starts below zero is a convex curve seen through a straight edge: take the curve.
        convex = fit.coef[0] < 0 <= quad.coef[0] and quad.coef[2] > 0
        if (significant(quad, 2) or convex) and quad.coef[1] > 0:
            fit, with_pairs = quad, True
        elif fit.coef[0] < 0:  # both start below zero: the curve through zero
            through = wls(np.column_stack([nn, pairs]), tt, ww)
            if through.coef[0] > 0 and through.coef[1] >= 0:
                fit = Linear(np.concatenate([[0.0], through.coef]), np.concatenate([[0.0], through.se]))
                with_pairs = True
    c = fit.coef
    if c[1] <= 0:
        return None
    p = float(c[2]) if with_pairs else 0.0
    pred = c[0] + c[1] * nn + p * pairs
    sse = float((ww * (tt - pred) ** 2).sum())
    floor = None
    if j:
        level = float(np.average(t[:j], weights=w[:j]))
        sd = (sse / max(1.0, float(ww.sum()) - len(c))) ** 0.5
        m = n[j - 1]
        cut_off = float(c[0] + c[1] * m + p * m * (m + 1) / 2)
        if c[0] < 0 or level - cut_off <= max(3 * sd, 0.02 * level):
            return None  # a convex line that dips below zero at short prompts is no floor
        floor = level - float(c[0])
        sse += float((w[:j] * (t[:j] - level) ** 2).sum())
    return float(c[0]), float(c[1]), p, sse, floor, with_pairs
