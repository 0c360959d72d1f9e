"""Which scheduler behaviour a sweep supports: identified from the data, not chosen by hand. Pure.

Two candidate laws for an engine's decode step against its batch b (docs/sim-explained.md "The engine model"):

- line (vLLM, SGLang, llama.cpp): every sequence adds to the step, t = F + S x b;
- floor (launch- or Python-bound engines, e.g. `transformers serve`): a step never takes less than a
  floor, the batch's work hidden under it until it exceeds it, t = max(floor, F + S x b).

Each is fitted to the sweep's loads (one point per load, each one observation: its median batch and
median time per step) and scored by its held-out error: every load left out in turn, the law fitted
to the others, the left-out load predicted (mean relative error over the loads). The lower error wins
when it is at most DECISIVE x the other's and lower by more than the loads' own noise (twice the
median relative standard error of their medians, at least MIN_GAP); otherwise the data do not
decide, the default (line, vLLM's) is kept, and the note names the load that would tell the two
apart: the batch where the two laws, fitted to all loads, differ most.

Loads during which the engine itself moved (engine_drift.within_load_drift) are left out: they
measured two engines, not one.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tokenpace.core.analysis.calibration.engine_obs import DecodeObs
from tokenpace.core.stats import robust_sd

DECISIVE = 0.67  # the winner's held-out error at most this share of the loser's
MIN_GAP = 0.005  # and lower by twice the loads' noise, at least half a point of relative error
# a load counts as past the floor's kink only this far above the floor: three times the floor loads'
# relative spread, at least MIN_KINK (less: it is on the floor, with noise)
MIN_KINK = 0.05
LINE, FLOOR = "line", "floor"


@dataclass(frozen=True, slots=True)
class LoadPoint:
    load: str
    batch: float  # median batch of its decode phases
    step_s: float  # median time per step
    weight: float  # requests behind it
    rel_se: float = 0.0  # relative standard error of its median step (1.2533 x robust sd / sqrt(n))


@dataclass(frozen=True, slots=True)
class Law:
    """t = max(floor, fixed + per_seq x b); floor 0 for a line."""

    name: str
    floor: float
    fixed: float
    per_seq: float

    def step(self, batch: float) -> float:
        return max(self.floor, self.fixed + self.per_seq * batch)


@dataclass(frozen=True, slots=True)
class StepLaw:
    chosen: str  # LINE or FLOOR (LINE when undecided: vLLM's, the default)
    decided: bool
    law: Law  # the chosen law fitted to every load that held still
    held_out: dict[str, float]  # each candidate's mean relative held-out error
    note: str  # which, how strongly, or what would decide


def load_points(decode: Sequence[DecodeObs], moved: Sequence[str] = ()) -> list[LoadPoint]:
    by: dict[str, list[DecodeObs]] = defaultdict(list)
    for d in decode:
        if d.load not in moved:
            by[d.load].append(d)
    out = []
    for load, obs in by.items():
        steps = np.asarray([d.step_s for d in obs])
        median = float(np.median(steps))
        rel_se = 1.2533 * robust_sd(steps) / max(median, 1e-12) / len(steps) ** 0.5
        batch = float(np.median([d.batch for d in obs]))
        out.append(LoadPoint(load, batch, median, float(len(obs)), rel_se))
    return out


def fit_line(points: Sequence[LoadPoint]) -> Law:
    """Least squares over the loads, each one observation (a big load must not drown the others)."""
    b = np.asarray([p.batch for p in points])
    t = np.asarray([p.step_s for p in points])
    if len(points) < 2 or b.max() - b.min() < 0.8:
        return Law(LINE, 0.0, float(t.mean()), 0.0)
    coef, *_ = np.linalg.lstsq(np.column_stack([np.ones_like(b), b]), t, rcond=None)
    fixed, per_seq = float(coef[0]), float(coef[1])
    if per_seq < 0:
        return Law(LINE, 0.0, float(t.mean()), 0.0)
    return Law(LINE, 0.0, fixed, per_seq)


def fit_floor(points: Sequence[LoadPoint]) -> Law:
    """The floor: the mean step of the loads below the kink; above it a line through the loads past
    the kink (through the origin when one load is past it: the batch's work alone). The kink where
    the relative squared error is least, among kinks whose loads past it sit clearly above the floor
    (three times the floor loads' relative spread, at least MIN_KINK: a load a little above it is on
    it, with noise)."""
    pts = sorted(points, key=lambda p: p.batch)
    best: tuple[float, Law] | None = None
    for j in range(min(2, len(pts)), len(pts) + 1):  # two loads or more on a floor: its spread
        low, high = pts[:j], pts[j:]
        steps = np.asarray([p.step_s for p in low])
        floor = float(steps.mean())
        margin = max(MIN_KINK, 3 * float(steps.std()) / floor)
        if not high:
            law = Law(FLOOR, floor, 0.0, 0.0)
        elif len({round(p.batch, 1) for p in high}) >= 2:
            line = fit_line(high)
            law = Law(FLOOR, floor, line.fixed, line.per_seq)
        else:
            p = high[0]
            law = Law(FLOOR, floor, 0.0, p.step_s / p.batch)
        if any(p.step_s < (1 + margin) * floor or law.fixed + law.per_seq * p.batch <= floor for p in high):
            continue  # a load past the kink must sit clearly above the floor (else it is on it)
        err = sum((law.step(p.batch) / p.step_s - 1) ** 2 for p in pts)
        if best is None or err < best[0]:
            best = (err, law)
    assert best is not None  # j = len(pts) always qualifies
    return best[1]


def held_out_error(points: Sequence[LoadPoint], name: str) -> float:
    """Mean relative error of each load predicted by the law fitted to the others."""
    fit = fit_line if name == LINE else fit_floor
    errs = []
    for i, p in enumerate(points):
        rest = [q for k, q in enumerate(points) if k != i]
        errs.append(abs(fit(rest).step(p.batch) / p.step_s - 1))
    return float(np.mean(errs))


def identify_step_law(decode: Sequence[DecodeObs], moved: Sequence[str] = ()) -> StepLaw:
    """The step law the sweep's loads support by held-out error (see the module's docstring)."""
    points = load_points(decode, moved)
    left_out = f" ({len(moved)} load(s) where the engine moved left out)" if moved else ""
    line_all = fit_line(points) if points else Law(LINE, 0.0, 0.0, 0.0)
    if len({round(p.batch, 1) for p in points}) < 3:
        note = (
            f"step law: line (vLLM's, the default), not tested: {len(points)} load(s) at "
            f"{len({round(p.batch, 1) for p in points})} batch size(s) held still{left_out}; three "
            "concurrencies or more (e.g. 1, 4, 16) would tell a per-step floor from a line"
        )
        return StepLaw(LINE, False, line_all, {}, note)
    err = {LINE: held_out_error(points, LINE), FLOOR: held_out_error(points, FLOOR)}
    floor_all = fit_floor(points)
    win, lose = (LINE, FLOOR) if err[LINE] <= err[FLOOR] else (FLOOR, LINE)
    noise = max(MIN_GAP, 2 * float(np.median([p.rel_se for p in points])))
    decided = err[win] <= DECISIVE * err[lose] and err[lose] - err[win] >= noise
    scores = (
        f"held-out error across {len(points)} loads{left_out}: line {err[LINE]:.1%}, floor {err[FLOOR]:.1%}"
    )
    law = {LINE: line_all, FLOOR: floor_all}
    if decided:
        closer = err[lose] / max(err[win], 1e-9)
        note = f"step law: {win} ({scores}: the {win} predicts the loads it did not see {closer:.1f}x closer)"
        if win == FLOOR:
            note += f"; a step takes at least {floor_all.floor * 1e3:.3g} ms whatever its batch"
        return StepLaw(win, True, law[win], err, note)
    users, a, b = separating_batch(points, line_all, floor_all)
    note = (
        f"step law: undecided, line kept (vLLM's default) ({scores}); a load that keeps about {users} "
        f"requests decoding at once would tell them apart: the line predicts {a * 1e3:.3g} ms a step "
        f"there, the floor {b * 1e3:.3g} ms"
    )
    return StepLaw(LINE, False, line_all, err, note)


def separating_batch(points: Sequence[LoadPoint], line: Law, floor: Law) -> tuple[int, float, float]:
    """The batch, not yet measured (none within 25 %), up to 4x the largest seen, where the two laws
    differ most (relative): (users, the line's step, the floor's step)."""
    seen = [p.batch for p in points]
    top = max(seen)
    grid = [b for b in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512) if b <= 4 * top]
    fresh = [b for b in grid if all(abs(b / s - 1) > 0.25 for s in seen)] or grid
    best = max(fresh, key=lambda b: abs(line.step(b) / max(floor.step(b), 1e-9) - 1))
    return best, line.step(best), floor.step(best)
