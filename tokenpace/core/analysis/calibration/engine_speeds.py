"""An engine at two speeds: which waves ran slow, the slow speed's step, and a load that switched. Pure.

On the H200 `transformers serve` records each admitted wave of a closed loop decodes all its tokens
at one of two speeds, ~20-40 ms a token or ~75-160 ms, nothing between, and which one is not set by
the load alone: every load's first wave is slow (a warm-up, engine_drift.steady_part); the 64-user
step stayed slow for its first two cycles of users, ran fast, then slow in its drain; the held-out
32-user loop ran a slow cycle, four fast, then slow again; 128 users and the Poisson load ran slow
throughout. A step law fitted to such loads fits the mix each drew (the 64-user step, its warm-up
trimmed, still mixes a slow cycle with fast ones; the 32-user loop's median request drew a fast
wave: the line through them overpredicts it ~2x), and no behaviour of the engine model says which
speed a wave gets. A load that went back and forth between the two speeds is a decided move of the
engine within it, with its size: `--calibrate` leaves it out of the step law as it does a load that
moved (engine_fit), and `--validate` judges a held-out one undecided with the move.

Declared where the load's per-wave times per output token (engine_drift.waves: users in lock step
are one observation), sorted, jump by SPLIT_RATIO or more between neighbours, with MIN_SIDE waves or
more on each side, and a slow wave sent after a fast one (slow waves only before the first fast one
are a warm-up, however long, not a second speed). A jump that wide with no wave between is not one
speed's spread (at the step noise the calibration fits on these records, CV ~0.3, one speed's waves
stay well within 2x). Its size is surely the fastest slow wave over the slowest fast one: every slow
wave was at least that much slower than every fast wave.

Across a sweep (`split_speeds`, `slow_speed`): where two loads or more each show waves SPLIT_RATIO or
more slower than their own fast ones (a warm-up counts: on these records every load's first wave,
from 1 to 64 users, ran at the slow speed), the engine has two speeds. `--calibrate` then fits the
step law to the fast waves alone and the slow speed's decode step (a line over the slow waves'
batches) apart, as what it adds to the fast one's; the profile carries both (the engine runs the
fast one, `sim --speed slow` the slow one) and `--validate` judges a held-out load that ran at one
speed throughout against that speed's prediction. Which speed a load gets is not identified: the
records show no load property that sets it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from tokenpace.core.analysis.calibration.engine_costs import StepCosts, wls
from tokenpace.core.analysis.calibration.engine_decode_obs import decode_observations
from tokenpace.core.analysis.calibration.engine_drift import DecodeDrift, wave_members, waves
from tokenpace.core.analysis.calibration.engine_obs import MeasuredLoad, timeline, usable

SPLIT_RATIO = 2.0  # the jump between neighbouring waves' speeds that one speed's spread never makes
MIN_SIDE = 2  # waves each speed needs


@dataclass(frozen=True, slots=True)
class TwoSpeeds:
    load: str
    waves: int  # independent observations (waves) in the load
    slow_waves: int
    fast_ms: float  # median time per output token of the fast waves
    slow_ms: float  # of the slow waves
    change: float  # slow over fast, less 1 (medians)
    surely: float  # the fastest slow wave over the slowest fast wave, less 1
    most: float  # the slowest slow wave over the fastest fast wave, less 1
    note: str

    def as_drift(self) -> DecodeDrift:
        """As a decided move within the load (engine_drift's terms): its size and bounds."""
        return DecodeDrift(self.load, self.change, self.surely, self.most, True, self.note)


def two_speeds(load: MeasuredLoad) -> TwoSpeeds | None:
    """The load's two decode speeds, if its waves fall into two (see the module); None if one."""
    tl = timeline(load.records)
    if tl is None:
        return None
    sent, tpot = waves(tl)
    if len(tpot) < 2 * MIN_SIDE:
        return None
    ranked = np.sort(tpot)
    ratios = ranked[1:] / ranked[:-1]
    cut = int(np.argmax(ratios)) + 1  # ranked[:cut] fast, ranked[cut:] slow
    if ratios[cut - 1] < SPLIT_RATIO or cut < MIN_SIDE or len(ranked) - cut < MIN_SIDE:
        return None
    threshold = float(ranked[cut])
    first_fast = float(sent[tpot < threshold].min())
    if not np.any((tpot >= threshold) & (sent > first_fast)):
        return None  # slow only before it first ran fast: a warm-up
    fast_ms, slow_ms = float(np.median(ranked[:cut])) * 1e3, float(np.median(ranked[cut:])) * 1e3
    change, surely = slow_ms / fast_ms - 1, float(ranked[cut] / ranked[cut - 1]) - 1
    most = float(ranked[-1] / ranked[0]) - 1
    slow = len(ranked) - cut
    note = (
        f"two decode speeds at {load.label}: {slow} of its {len(ranked)} waves decoded at {slow_ms:.3g} ms "
        f"a token, the rest at {fast_ms:.3g} ms, none between ({change:+.0%}, surely {surely:+.0%}), "
        "not only at its start: this load measured an engine that switched speed, and no behaviour of "
        "the engine model says which speed a wave gets (longer steps at each load, counting slow and "
        "fast waves, would tell whether the share follows the load)"
    )
    return TwoSpeeds(load.label, len(ranked), slow, fast_ms, slow_ms, change, surely, most, note)


MIN_SLOW_LOADS = 2  # loads that each showed the slow speed before a second speed is declared


@dataclass(frozen=True, slots=True)
class SpeedSplit:
    """A sweep's loads cut by speed: each load's fast waves, and the slow waves of those that had some."""

    fast: tuple[MeasuredLoad, ...]  # every load, its slow waves taken out
    slow: tuple[MeasuredLoad, ...]  # the slow waves of the loads that had them
    slow_waves: int
    waves: int


def split_speeds(loads: Sequence[MeasuredLoad]) -> SpeedSplit | None:
    """The sweep's waves parted into two speeds, where the engine showed two; None where it did not.

    A load shows the slow speed where its waves (all of them, its start and drain too: here the
    speed, not the load's steadiness, is in question), sorted, jump by SPLIT_RATIO or more between
    neighbours with MIN_SIDE fast waves or more: the waves above the jump are slow. A warm-up counts:
    it is the engine at its slow speed (on the H200 records every load's first wave, from 1 to 64
    users, decoded 3-5x slower than the rest). Declared when MIN_SLOW_LOADS loads or more show it, so
    that one load's stray waves never make a second engine."""
    fast, slow = [], []
    n_slow = n_all = 0
    for ld in loads:
        ok = usable(ld.records)
        tl = timeline(ld.records)
        if tl is None:
            fast.append(ld)
            continue
        tpot = (tl.end - tl.first) / (tl.out - 1)
        groups = wave_members(tl.first, tpot)
        values = np.asarray([float(np.median(tpot[m])) for m in groups])
        n_all += len(values)
        threshold = _slow_threshold(values)
        if threshold is None:
            fast.append(ld)
            continue
        is_slow = np.zeros(len(ok), dtype=bool)
        for m, v in zip(groups, values, strict=True):
            is_slow[m] = v >= threshold
        n_slow += int((values >= threshold).sum())
        fast.append(replace(ld, records=tuple(r for r, s in zip(ok, is_slow, strict=True) if not s)))
        slow.append(replace(ld, records=tuple(r for r, s in zip(ok, is_slow, strict=True) if s)))
    if len(slow) < MIN_SLOW_LOADS:
        return None
    return SpeedSplit(tuple(fast), tuple(slow), n_slow, n_all)


def _slow_threshold(values: np.ndarray) -> float | None:
    """The slowest fast wave's successor, where the sorted waves jump by SPLIT_RATIO; None if not."""
    if len(values) < MIN_SIDE + 1:
        return None
    ranked = np.sort(values)
    ratios = ranked[1:] / ranked[:-1]
    cut = int(np.argmax(ratios)) + 1
    if ratios[cut - 1] < SPLIT_RATIO or cut < MIN_SIDE:
        return None
    return float(ranked[cut])


@dataclass(frozen=True, slots=True)
class SlowSpeed:
    """The slow speed's decode step, as what it adds to the fast speed's (seconds)."""

    extra_fixed: float  # per step
    extra_per_seq: float  # per sequence in the step
    at_one: float  # the slow decode step at batch 1
    per_seq: float  # its slope over the batch
    batches: tuple[float, float]  # the batches the slow waves decoded at
    note: str


def slow_speed(split: SpeedSplit, costs: StepCosts) -> SlowSpeed | None:
    """The slow waves' decode step against their batch: a line (one level where they all ran at one
    batch), each load one point weighted by its slow waves, priced as the fast fit prices joining
    prefills; None where no slow wave decoded two tokens."""
    points: list[tuple[float, float, float]] = []  # (batch, step s, weight)
    for ld in split.slow:
        tl = timeline(ld.records)
        if tl is None:
            continue
        obs = decode_observations(tl, ld.label, costs)
        if obs:
            tpot = (tl.end - tl.first) / (tl.out - 1)
            n_waves = float(len(wave_members(tl.first, tpot)))
            points.append(
                (float(np.mean([o.batch for o in obs])), float(np.median([o.step_s for o in obs])), n_waves)
            )
    if not points:
        return None
    b = np.asarray([p[0] for p in points])
    t = np.asarray([p[1] for p in points])
    w = np.asarray([p[2] for p in points])
    if b.max() - b.min() >= 0.8 and len(points) >= 2:
        coef = wls(np.column_stack([np.ones_like(b), b]), t, w).coef
        at_zero, slope = float(coef[0]), max(0.0, float(coef[1]))
        if slope == 0.0:
            at_zero = float(np.average(t, weights=w))
    else:
        at_zero, slope = float(np.average(t - costs.per_seq * b, weights=w)), costs.per_seq
    fast_zero = costs.fixed + costs.weights
    extra_fixed = max(0.0, at_zero - fast_zero)
    extra_per_seq = max(-costs.per_seq, slope - costs.per_seq)
    at_one = fast_zero + extra_fixed + costs.per_seq + extra_per_seq
    per_seq = costs.per_seq + extra_per_seq
    fast_one = costs.decode_step(1, 0)
    note = (
        f"two speeds: {split.slow_waves} of {split.waves} waves in {len(split.slow)} loads decoded at a "
        f"slow speed, {SPLIT_RATIO:.0f}x or more their load's fast waves (every load's first wave "
        f"counts: a warm-up is the engine at its slow speed); the fast speed is fitted without them "
        f"({fast_one * 1e3:.3g} ms a step at batch 1, +{costs.per_seq * 1e3:.3g} ms a sequence), the "
        f"slow one from them ({at_one * 1e3:.3g} ms at batch 1, +{per_seq * 1e3:.3g} ms a sequence, "
        f"seen at batches {b.min():.0f}-{b.max():.0f}). Which speed a load gets is not set by the load: "
        "the profile runs the fast speed, `sim --speed slow` the slow one, and --validate judges a "
        "held-out load against the speed its waves ran at"
    )
    return SlowSpeed(extra_fixed, extra_per_seq, at_one, per_seq, (float(b.min()), float(b.max())), note)
