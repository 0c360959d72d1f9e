"""The decode fit and the joint solve of a calibration (steps 2-4 of
tokenpace.core.analysis.calibration.engine_fit).

Pure. Decode observations are grouped per load and prompt length (medians: a step that stalled on a
busy machine must not move the fit), then the split of the constant parts between the round trip, the
step's fixed cost and the weights' read is settled, and F and S are solved jointly over prefill and
decode observations with the other coefficients held.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tokenpace.core.analysis.calibration.engine_costs import (
    EngineFit,
    Param,
    Prefill,
    StepCosts,
    groups,
    significant,
    wls,
)
from tokenpace.core.analysis.calibration.engine_obs import DecodeObs, MeasuredLoad


def solve(prefill: Prefill, decode: list[DecodeObs], loads: Sequence[MeasuredLoad]) -> EngineFit:
    """Steps 2-4 of the fit, given the prefill line and the decode observations."""
    if not decode:
        raise ValueError("no request decoded two or more tokens: nothing to fit the decode step to")
    g = np.asarray(groups([((d.load, round(d.prompt_tokens)), d.batch, d.context, d.step_s) for d in decode]))
    b, ctx, step, w = g[:, 0], g[:, 1], g[:, 2], g[:, 3]
    with_batch = bool(b.max() - b.min() >= 0.8)
    cols = [np.ones_like(b)] + ([b] if with_batch else []) + [ctx]
    lin = wls(np.column_stack(cols), step, w)
    k_ok = bool(ctx.max() >= 1.5 * ctx.min()) and significant(lin, len(cols) - 1)
    if not k_ok:
        lin = wls(np.column_stack(cols[:-1]), step, w)
    per_context = float(lin.coef[-1]) if k_ok else 0.0
    d1 = float(lin.coef[0] + (lin.coef[1] if with_batch else 0.0))  # batch 1, no context
    notes: dict[str, Param] = dict(prefill.notes)
    rtt, weights = _split_constants(prefill, d1, loads, notes)
    a, p = prefill.per_token, prefill.per_pair
    # F and S from the decode steps alone: they are many and clean, where a CPU engine's TTFT can bend
    # in ways the roofline does not (the prefill's shape is a and p; its constant is settled below).
    for _ in range(3):  # a negative F means W took too much of the decode step's constant: give it back
        held = StepCosts(0.0, 0.0, weights, per_context, a, p)
        fixed, per_seq = _fixed_and_per_seq(b, ctx, step, w, with_batch, held)
        if fixed >= 0 or weights <= 0:
            break
        weights = max(0.0, weights + fixed)
    else:  # lowered a third time: F and S again against the weights the profile will carry
        held = StepCosts(0.0, 0.0, weights, per_context, a, p)
        fixed, per_seq = _fixed_and_per_seq(b, ctx, step, w, with_batch, held)
    if fixed < 0:  # steps that grow faster than their batch (a CPU engine): S alone, F held at 0
        fixed, per_seq = 0.0, _per_seq_alone(b, ctx, step, w, held) if with_batch else per_seq
    notes["weights"] = Param(
        "weights", weights * 1e3, "ms", notes["weights"].identified, notes["weights"].how
    )
    # TTFT's excess over one prefill step, weighted median over prompt lengths: the round trip plus
    # any fixed cost a request pays before its first step (parsing, tokenising, queue hand-off).
    excess = [
        (pt - fixed - per_seq - max(a * pn + p * pn * (pn + 1) / 2, weights), pw)
        for pn, pt, pw in prefill.groups
    ]
    rtt = max(0.0, weighted_median(excess))
    notes["rtt"] = Param("rtt", rtt * 1e3, "ms", notes["rtt"].identified, notes["rtt"].how)
    costs = StepCosts(fixed, per_seq, weights, per_context, a, p, rtt)
    notes["step_fixed"] = Param(
        "step_fixed", fixed * 1e3, "ms", True, "shared constant of prefill and decode steps"
    )
    notes["per_seq"] = Param(
        "per_seq", per_seq * 1e3, "ms", with_batch,
        f"slope of the decode step over batches of {b.min():.1f}-{b.max():.1f}" if with_batch
        else "every decode ran at one batch size: its cost is folded into the fixed part (sweep concurrency)",
    )  # fmt: skip
    notes["per_context"] = Param(
        "per_context", per_context * 1e6, "us/token", k_ok,
        "slope of the decode step over its context" if k_ok
        else "no significant growth of the decode step with context over the lengths measured",
    )  # fmt: skip
    residuals = {
        "prefill_rel_rms": _rel_rms(
            [costs.ttft(g[0]) for g in prefill.groups], [g[1] for g in prefill.groups]
        ),
        "decode_rel_rms": _rel_rms(
            [costs.decode_step(bi, ci) for bi, ci in zip(b, ctx, strict=True)], list(step)
        ),
        "prefill_groups": float(len(prefill.groups)),
        "decode_groups": float(len(step)),
    }  # fmt: skip
    observed = {
        "prompt_tokens": list(prefill.n_range),
        "batch": [float(b.min()), float(b.max())],
        "context_tokens": [float(ctx.min()), float(ctx.max())],
    }
    return EngineFit(costs, 0, tuple(notes.values()), residuals, _holds(observed, loads), observed)


def _split_constants(
    prefill: Prefill, d1: float, loads: Sequence[MeasuredLoad], notes: dict[str, Any]
) -> tuple[float, float]:
    """(R, W): TTFT's intercept I = R + F + S and a decode step at batch 1 = F + S + W."""
    intercept = max(prefill.intercept, 0.0)  # a TTFT line below zero at no prompt is no fixed part
    server = [ld.server_network_ms for ld in loads if ld.server_network_ms is not None]
    if server:
        rtt = max(0.0, float(np.median(server)) / 1e3)
        weights = max(0.0, d1 - (intercept - rtt))
        how_r, how_w, ok_w = (
            f"TTFT's excess over one prefill step (the server's split: {rtt * 1e3:.3g} ms on the network)",
            "decode step less the prefill's fixed part",
            True,
        )
    elif prefill.plateau is not None and prefill.plateau < d1:  # W is part of every decode step
        weights = prefill.plateau
        rtt = max(0.0, intercept + weights - d1)
        how_r, how_w, ok_w = (
            "TTFT's excess over one prefill step, with the weights' read from the short prompts' floor",
            "short prompts' TTFT floor",
            True,
        )
    else:
        rtt, weights = max(0.0, intercept - d1), max(0.0, d1 - intercept)
        how_r = (
            "TTFT's excess over one prefill step: the round trip and any fixed prefill cost, not told "
            "apart without server metrics or a memory-bound floor"
        )
        how_w, ok_w = "decode step at batch 1 less TTFT's intercept", False
    weights = min(weights, d1)  # the weights' read is part of every decode step
    notes["rtt"] = Param("rtt", rtt * 1e3, "ms", bool(server) or prefill.plateau is not None, how_r)
    notes["weights"] = Param("weights", weights * 1e3, "ms", ok_w, how_w)
    return rtt, weights


def _rel_rms(pred: list[float], meas: list[float]) -> float:
    p, m = np.asarray(pred), np.asarray(meas)
    ok = m > 0
    return float(np.sqrt(np.mean(((p[ok] - m[ok]) / m[ok]) ** 2))) if ok.any() else 0.0


def _holds(observed: dict[str, list[float]], loads: Sequence[MeasuredLoad]) -> tuple[str, ...]:
    lo, hi = observed["prompt_tokens"]
    blo, bhi = observed["batch"]
    out = [
        f"holds for prompts of {lo:.0f}-{hi:.0f} tokens, decode batches of {blo:.1f}-{bhi:.1f}: fitted there",
        f"longer prompts and batches past {bhi:.1f} are extrapolated (linear step costs)",
    ]
    if loads and all(ld.rate is None for ld in loads):
        out.append(
            "fitted on closed loops only, where the engine never idles: an open loop's gaps between "
            "arrivals may slow its next steps (a core or GPU clocks down when idle), which the model "
            "does not price; --validate on a measured rate step shows how much that matters"
        )
    kv = [ld.server_max_kv_usage for ld in loads if ld.server_max_kv_usage is not None]
    if not kv:
        out.append(
            "the KV-cache limit is unknown (no server KV gauge): past it (preemption) the model does not hold"
        )
    elif max(kv) >= 0.9:
        out.append(
            f"the KV cache reached {max(kv):.0%}: steps near the limit may be mispredicted (preemptions)"
        )
    else:
        out.append(
            f"the KV cache peaked at {max(kv):.0%}: past its limit the simulator preempts and recomputes "
            "as vLLM does, which was not calibrated"
        )
    return tuple(out)


def weighted_median(pairs: list[tuple[float, float]]) -> float:
    ordered = sorted(pairs)
    half = sum(wt for _, wt in ordered) / 2
    seen = 0.0
    for value, wt in ordered:
        seen += wt
        if seen >= half:
            return value
    return 0.0


def _fixed_and_per_seq(
    b: np.ndarray, ctx: np.ndarray, step: np.ndarray, w: np.ndarray, with_batch: bool, held: StepCosts
) -> tuple[float, float]:
    """F and S by least squares over the decode groups, the other coefficients held."""
    rows, ys = [], []
    for bi, ci, si in zip(b, ctx, step, strict=True):
        rows.append([1.0, bi] if with_batch else [1.0])
        ys.append(si - held.decode_step(bi, ci))  # held has F = S = 0: this is the step less max(...)
    x, y = np.asarray(rows), np.asarray(ys)
    coef = wls(x, y, w).coef
    fixed, per_seq = float(coef[0]), float(coef[1]) if with_batch else 0.0
    if per_seq < 0:
        per_seq, fixed = 0.0, float(np.average(y, weights=w))
    return fixed, per_seq


def _per_seq_alone(b: np.ndarray, ctx: np.ndarray, step: np.ndarray, w: np.ndarray, held: StepCosts) -> float:
    """S by least squares with F = 0: clamping an unconstrained fit's negative F to 0 and keeping its
    S (steeper, to make up for that F) priced every decode step too high (+40 % at batch 1 on one
    llama-server run)."""
    y = np.asarray([si - held.decode_step(bi, ci) for bi, ci, si in zip(b, ctx, step, strict=True)])
    return max(0.0, float((w * b * y).sum() / (w * b * b).sum()))
