"""Decode observations: a request's time per output token against the batch its steps shared.

Pure. A request decodes out - 1 steps between its first token and its last. Over that phase other
requests start decoding (their first token ends the step that prefilled them, a step this request
shared) and stop. Its time per output token, once the joining prefills are taken out, is the mean of
its steps; for the fit it must be set against the mean batch *of those steps*.

Averaging the batch over the phase's time instead (as the calibration first did) gives the slow
steps too much weight: a joining prompt's prefill step lasts many decode steps (13 ms against
1-2 ms on a CPU engine), and while it runs the newcomer is not yet decoding, so a phase at an
engine's 2-slot limit read as batch 1.8 while all its decode steps ran at batch 2; the fit then
tilted the per-sequence cost up (+19-23 % on a simulated 2-slot engine, tests/sim/
test_sim_calibrate_slope.py) and over-predicted the loads at the limit.

Here the phase is cut where the set of requests decoding alongside changes; each piece lasts its
time less the joining prefills that ended in it, and holds that time over the previous round's step
price at its batch, in steps (scaled so the pieces hold the phase's out - 1 steps).
"""

from __future__ import annotations

import numpy as np

from tokenpace.core.analysis.calibration.engine_costs import StepCosts
from tokenpace.core.analysis.calibration.engine_obs import DecodeObs, Timeline


def decode_observations(
    tl: Timeline, load: str, costs: StepCosts, only_first: int | None = None
) -> list[DecodeObs]:
    """Each request's decode phase: its time per step, the mean batch and context of its steps.

    `costs` (the previous round's fit) prices the joining prefills and weighs the pieces' steps;
    with nothing fitted yet (no per-sequence or fixed cost), steps are taken as proportional to
    their batch. `only_first`: the phases of the timeline's first requests only (by send time),
    every request still counted in their batches."""
    f, e = tl.first, tl.end
    span = e - f
    tol = 0.5 * float(np.median(span / (tl.out - 1)))  # token arrival jitter: same-step events straddle
    out = []
    for i in range(len(f) if only_first is None else min(only_first, len(f))):
        obs = _one_phase(tl, i, tol, costs)
        if obs is not None:
            out.append(DecodeObs(load, obs[0], obs[1], obs[2], float(tl.prompt[i])))
    return out


def _one_phase(tl: Timeline, i: int, tol: float, costs: StepCosts) -> tuple[float, float, float] | None:
    """(mean batch of the steps, their mean context, time per step less joining prefills) for request i."""
    f, e, span = tl.first, tl.end, tl.end - tl.first
    lo, hi = f[i], e[i]
    others = np.flatnonzero((f < hi - tol) & (e > lo + tol))
    others = others[others != i]
    # Cuts: where another request starts or stops decoding inside the phase (jitter-shrunk edges).
    cuts = np.concatenate([[lo], np.clip(np.concatenate([f[others], e[others]]), lo, hi), [hi]])
    cuts = np.unique(cuts)
    if len(cuts) < 2:
        return None
    starts, ends = cuts[:-1], cuts[1:]
    mids = 0.5 * (starts + ends)
    decoding = (f[others][None, :] < mids[:, None]) & (e[others][None, :] > mids[:, None])
    batch = 1.0 + decoding.sum(axis=1)
    made = np.clip((mids[:, None] - f[others]) / np.maximum(span[others], 1e-12), 0.0, 1.0) * tl.out[others]
    own = tl.prompt[i] + np.clip((mids - lo) / max(span[i], 1e-12), 0.0, 1.0) * tl.out[i]
    context = own + (decoding * (tl.prompt[others] + made)).sum(axis=1)
    dur = ends - starts
    extra = np.zeros_like(dur)
    # Requests whose first token ended a step of this phase: their prefill ran in that step.
    joined = np.flatnonzero((f > lo + tol) & (f < hi + tol))
    steps_joined = _by_step(f, tl.prompt, joined[joined != i], tol)
    if steps_joined:  # each in the piece its step ended (the newcomer's first token ends it)
        at = np.searchsorted(ends, np.asarray([t for t, _ in steps_joined]) - 1e-12)
        for k, (_, prompts) in zip(np.minimum(at, len(dur) - 1).tolist(), steps_joined, strict=True):
            extra[k] += costs.joining_prefill(prompts, float(batch[k]), float(context[k]))
    n_steps = tl.out[i] - 1
    decode_time = float(span[i] - extra.sum())
    if decode_time <= 0:
        return None
    left = np.clip(dur - extra, 0.0, None)
    steps = left / _step_price(costs, batch, context)
    if steps.sum() <= 0:
        return None
    weight = steps / steps.sum()
    return float(weight @ batch), float(weight @ context), decode_time / n_steps


def _step_price(costs: StepCosts, batch: np.ndarray, context: np.ndarray) -> np.ndarray:
    """Decode steps' relative durations at these batches: the fit so far (StepCosts.decode_step, on
    arrays), or the batch itself before it."""
    c = costs
    if c.fixed == 0.0 and c.per_seq == 0.0 and c.weights == 0.0:
        return batch
    compute = c.per_token * batch + c.per_pair * context
    memory = c.weights + c.per_context * context
    return np.maximum(c.fixed + c.per_seq * batch + np.maximum(compute, memory), 1e-12)


def _by_step(
    first: np.ndarray, prompt: np.ndarray, idx: np.ndarray, tol: float
) -> list[tuple[float, list[float]]]:
    """(the step's first token time, prompts of the requests that joined in it), per step."""
    steps: list[tuple[float, list[float]]] = []
    last = -np.inf
    for j in idx[np.argsort(first[idx])]:
        if first[j] - last > tol:
            steps.append((float(first[j]), []))
        steps[-1][1].append(float(prompt[j]))
        last = first[j]
    return steps
