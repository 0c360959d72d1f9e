"""The step-cost model a calibration fits, its parameters' notes, and the fit's small helpers.

Pure. The simulator prices one engine step as
    F + seqs x S + max(compute, memory),  compute = tokens x a + attention pairs x p,
                                          memory  = W + decoding context x k
(tokenpace.sim.model.costmodel), plus, for an engine that packs a step's sequences under one mask,
tokens x keys of the whole step x P in place of a joining prompt's own work; `StepCosts` holds those
coefficients in seconds.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True, slots=True)
class Param:
    name: str
    value: float
    unit: str
    identified: bool
    how: str  # how the data identified it, or why it was left at a default


@dataclass(frozen=True, slots=True)
class StepCosts:
    """The step-cost coefficients in seconds (per token, per pair, per sequence)."""

    fixed: float = 0.0  # F
    per_seq: float = 0.0  # S
    weights: float = 0.0  # W
    per_context: float = 0.0  # k
    per_token: float = 0.0  # a
    per_pair: float = 0.0  # p
    rtt: float = 0.0  # R
    packed_pair: float = 0.0  # per (query, key) pair of a whole step holding a prefill (0: per sequence)

    def ttft(self, n: float) -> float:
        """A request alone: round trip plus one prefill step of n tokens."""
        compute = self.per_token * n + self.per_pair * n * (n + 1) / 2
        return self.rtt + self.fixed + self.per_seq + max(compute, self.weights)

    def decode_step(self, batch: float, context: float) -> float:
        compute = self.per_token * batch + self.per_pair * context
        memory = self.weights + self.per_context * context
        return self.fixed + self.per_seq * batch + max(compute, memory)

    def joining_prefill(self, prompts: list[float], batch: float, context: float) -> float:
        """What prefills of these prompts add to the decode step (of that batch and context) they join."""
        if self.packed_pair:  # every pair of the packed step, never under the prompts' own work
            n = sum(prompts)
            own = sum(self.per_token * k + self.per_pair * k * (k + 1) / 2 for k in prompts)
            return self.per_seq * len(prompts) + max(own, self.packed_pair * (n + batch) * (n + context))
        joined = sum(self.per_token * n + self.per_pair * n * (n + 1) / 2 for n in prompts)
        compute = self.per_token * batch + self.per_pair * context
        memory = self.weights + self.per_context * context
        return self.per_seq * len(prompts) + max(compute + joined, memory) - max(compute, memory)


@dataclass(frozen=True, slots=True)
class EngineFit:
    costs: StepCosts
    max_num_seqs: int
    params: tuple[Param, ...]
    residuals: dict[str, float]  # relative RMS error of the fitted model on what it was fitted to
    holds: tuple[str, ...]  # where the model holds, and where not
    observed: dict[str, list[float]] = field(default_factory=dict)  # ranges the data covered
    jitter: float = 0.0  # seconds: half-normal scale of the round trip's spread (see engine_fit)
    kv_tokens: int | None = None  # KV-cache capacity, where the server's gauge showed it
    step_cv: float = 0.0  # coefficient of variation of a step's duration (step_noise_fit)
    step_cv_hold: float = 0.0  # seconds: correlation time of that variation (0: independent steps)
    # Prefill time against prompt length as measured, where the line misfits (prefill_table_fit):
    # (prompt tokens, ms) at the ladder's lengths; empty when the line prices prefill.
    prefill_table: tuple[tuple[float, float], ...] = ()
    # The scheduler behaviours the sweep supported (scheduler_fit, prefill_gaps): a per-step floor in
    # seconds (0: none, vLLM's), prefill-first steps, and what was chosen, how strongly, or what would
    # decide; loads during which the engine moved (engine_drift.within_load_drift), with how much.
    step_floor: float = 0.0
    prefill_first: bool = False
    behaviours: tuple[str, ...] = ()
    moved_within: tuple[str, ...] = ()
    # A second, slower speed some waves decoded at (engine_speeds), as what it adds to the fitted
    # decode step in seconds: per step and per sequence (0, 0: one speed).
    slow_extra_fixed: float = 0.0
    slow_extra_per_seq: float = 0.0


@dataclass(slots=True)
class Linear:
    coef: np.ndarray
    se: np.ndarray


def wls(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> Linear:
    sw = np.sqrt(w)
    coef, *_ = np.linalg.lstsq(x * sw[:, None], y * sw, rcond=None)
    resid = (y - x @ coef) * sw
    dof = max(1, len(y) - x.shape[1])
    s2 = float(resid @ resid) / dof
    try:
        cov = s2 * np.linalg.inv((x * w[:, None]).T @ x)
        se = np.sqrt(np.clip(np.diag(cov), 0.0, None))
    except np.linalg.LinAlgError:
        se = np.full(x.shape[1], np.inf)
    return Linear(coef, se)


def significant(fit: Linear, k: int) -> bool:
    """Positive and at least two standard errors from zero (exact data: any positive value)."""
    return bool(fit.coef[k] > 0 and fit.coef[k] > 2 * fit.se[k])


def groups(values: list[tuple[Any, ...]]) -> list[tuple[float, ...]]:
    """Median of each column per key, with the group's size last (noisy steps: medians, not means)."""
    by: dict[Any, list[tuple[float, ...]]] = defaultdict(list)
    for key, *cols in values:
        by[key].append(tuple(float(c) for c in cols))
    return [(*np.median(np.asarray(rows), axis=0).tolist(), float(len(rows))) for rows in by.values()]


@dataclass(slots=True)
class Prefill:
    intercept: float  # I
    per_token: float
    per_pair: float
    plateau: float | None  # W when short prompts showed the memory-bound floor
    notes: dict[str, Param]
    n_range: tuple[float, float]
    groups: list[tuple[float, float, float]]  # (prompt tokens, median TTFT s, requests)
