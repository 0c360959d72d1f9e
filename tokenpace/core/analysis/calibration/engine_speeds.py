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

Across a sweep (`split_speeds`, `slow_throughout`, `slow_speed`, `speed_misfit`): where two loads or
more each show waves SPLIT_RATIO or more slower than their own fast ones, and one of them went back
to the slow speed after running fast, the engine has two speeds; a warm-up then counts as that speed
(on these records every load's first wave, from 1 to 64 users, ran at it), though warm-ups alone
declare nothing. A load with no jump that a fit to the parted loads prices 2x too fast ran slow
throughout and goes to the slow side whole. `--calibrate` then fits the step law to the fast waves
alone and the slow speed's decode step (a line over the slow waves' batches) apart, as what it adds
to the fast one's, kept where it is clearly slower and, over the same requests, misfits the step
less than one speed (engine_fit.KEEP_MARGIN); the profile carries both (the engine runs the fast
one, `sim --speed slow` the slow one) and `--validate` judges a held-out load that ran at one speed
throughout against that speed's prediction, the speed chosen from its own waves. Which speed a load
gets is not identified: the records show no load property that sets it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from tokenpace.core.analysis.calibration.engine_costs import StepCosts, wls
from tokenpace.core.analysis.calibration.engine_decode_obs import decode_observations
from tokenpace.core.analysis.calibration.engine_drift import DecodeDrift, wave_members, waves
from tokenpace.core.analysis.calibration.engine_obs import DecodeObs, MeasuredLoad, timeline, usable

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
    parted: tuple[bool, ...] = ()  # for each of `fast`: had slow waves taken out (its fast ones are sure)
    returned: tuple[str, ...] = ()  # loads that went back to the slow speed after running fast
    throughout: tuple[str, ...] = ()  # loads slow throughout, against the fast fit (slow_throughout)


def split_speeds(loads: Sequence[MeasuredLoad]) -> SpeedSplit | None:
    """The sweep's waves parted into two speeds, where the engine showed two; None where it did not.

    A load shows the slow speed where its waves (all of them, its start and drain too: here the
    speed, not the load's steadiness, is in question), sorted, jump by SPLIT_RATIO or more between
    neighbours with MIN_SIDE fast waves or more: the waves above the jump are slow. A warm-up counts
    (on the H200 records every load's first wave, from 1 to 64 users, decoded 3-5x slower than the
    rest) once a load went back to the slow speed after running fast: warm-ups alone are a start-up
    cost, not a speed a load runs at. Declared when MIN_SLOW_LOADS loads or more show it, so that one
    load's stray waves never make a second engine."""
    fast, slow, returned, parted = [], [], [], []
    n_slow = n_all = 0
    for ld in loads:
        ok = usable(ld.records)
        tl = timeline(ld.records)
        if tl is None:
            fast.append(ld)
            parted.append(False)
            continue
        tpot = (tl.end - tl.first) / (tl.out - 1)
        groups = wave_members(tl.first, tpot)
        values = np.asarray([float(np.median(tpot[m])) for m in groups])
        n_all += len(values)
        threshold = _slow_threshold(values)
        if threshold is None:
            fast.append(ld)
            parted.append(False)
            continue
        parted.append(True)
        is_slow = np.zeros(len(ok), dtype=bool)
        for m, v in zip(groups, values, strict=True):
            is_slow[m] = v >= threshold
        n_slow += int((values >= threshold).sum())
        starts = np.asarray([float(tl.first[m].min()) for m in groups])
        if np.any((values >= threshold) & (starts > starts[values < threshold].min())):
            returned.append(ld.label)
        fast.append(replace(ld, records=tuple(r for r, s in zip(ok, is_slow, strict=True) if not s)))
        slow.append(replace(ld, records=tuple(r for r, s in zip(ok, is_slow, strict=True) if s)))
    if len(slow) < MIN_SLOW_LOADS or not returned:
        return None
    return SpeedSplit(tuple(fast), tuple(slow), n_slow, n_all, tuple(parted), tuple(returned))


def slow_throughout(
    split: SpeedSplit, costs: StepCosts, floor: float = 0.0, batch_seen: float = float("inf")
) -> SpeedSplit:
    """The split with every load that showed no jump (none of its waves parted off) and whose decode
    steps ran SPLIT_RATIO or more slower than `costs` price them moved whole to the slow side: a load
    that ran slow throughout. `costs` and `floor`: a fit to the loads that did part, whose fast waves
    are sure (a fit that took the slow-throughout loads in would price them near themselves), priced
    as the simulator runs it (never under its floor). Judged by the median over the load's requests
    of step over price, only those whose batch lies within SPLIT_RATIO of `batch_seen`, the largest
    batch that fit saw (further out its line is a guess, not a sure fast speed), MIN_SIDE or more."""
    fast, slow, moved = [], list(split.slow), []
    waves = 0
    for ld, parted in zip(split.fast, split.parted, strict=True):
        tl = timeline(ld.records)
        obs = decode_observations(tl, ld.label, costs) if tl is not None and not parted else []
        # past twice the batches the sure fit saw its line is a guess: those phases are not judged
        obs = [o for o in obs if o.batch <= SPLIT_RATIO * batch_seen]
        if len(obs) < MIN_SIDE:
            obs = []
        ratio = [o.step_s / p for o in obs if (p := decode_step(costs, floor, o.batch, o.context)) > 0]
        if tl is None or not ratio or float(np.median(ratio)) < SPLIT_RATIO:
            fast.append(ld)
            continue
        tpot = (tl.end - tl.first) / (tl.out - 1)
        waves += len(wave_members(tl.first, tpot))
        moved.append(ld.label)
        slow.append(ld)
    if not moved:
        return split
    n_slow = split.slow_waves + waves
    return replace(
        split, fast=tuple(fast), slow=tuple(slow), slow_waves=n_slow, parted=(), throughout=tuple(moved)
    )


def speed_misfit(
    split: SpeedSplit,
    one: StepCosts,
    fast: StepCosts,
    slow: SlowSpeed,
    floors: tuple[float, float] = (0.0, 0.0),
) -> tuple[float, float]:
    """(one speed's, two speeds') relative RMS misfit of the decode step over the same requests: every
    fast and slow wave of the split, the one speed pricing all of them alike, the two speeds each at
    its own (joining prefills priced by the fast fit, for both); each step priced as the simulator
    runs it, never under its fit's floor (`floors`: the one speed's, the two speeds')."""
    err_one: list[float] = []
    err_two: list[float] = []
    for parts, add in ((split.fast, (0.0, 0.0)), (split.slow, (slow.extra_fixed, slow.extra_per_seq))):
        for ld in parts:
            tl = timeline(ld.records)
            for o in decode_observations(tl, ld.label, fast) if tl is not None else []:
                two = decode_step(fast, floors[1], o.batch, o.context, *add)
                err_one.append(decode_step(one, floors[0], o.batch, o.context) / o.step_s - 1)
                err_two.append(two / o.step_s - 1)
    if not err_one:
        return 0.0, 0.0
    return float(np.sqrt(np.mean(np.square(err_one)))), float(np.sqrt(np.mean(np.square(err_two))))


def decode_step(
    costs: StepCosts,
    floor: float,
    batch: float,
    context: float,
    extra_fixed: float = 0.0,
    extra_per_seq: float = 0.0,
) -> float:
    """The decode step as the simulator runs it: the fitted line, plus a speed's extras, never under
    the floor (sim.model.costmodel)."""
    return max(floor, costs.decode_step(batch, context) + extra_fixed + extra_per_seq * batch)


def speed_level(obs: Sequence[DecodeObs], costs: StepCosts, floor: float) -> float:
    """Seconds a step ran over the fitted law, in the median of these decode phases (0 at the law's
    speed; a wandering slow speed's level, read from part of a load)."""
    return float(np.median([o.step_s - decode_step(costs, floor, o.batch, o.context) for o in obs]))


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


def slow_speed(split: SpeedSplit, costs: StepCosts, floor: float = 0.0) -> SlowSpeed | str:
    """What the slow waves' decode step adds to the fast fit's line, against their batch: a line over
    the loads (one level where they all ran at one batch; a level, too, where the line falls: the
    slow speed must not come out faster than the fast one past the batches seen; through zero where
    it would start below it), each load one point weighted by its slow waves, joining prefills priced
    as the fast fit prices them. Why not, where no slow wave decoded two tokens or the slow step is
    not clearly slower (SLOWER_AT_LEAST) than the fast one, as the simulator runs both (the fast fit's
    `floor` under each), at the smallest and the largest batch its waves ran at."""
    points: list[tuple[float, float, float, float]] = []  # (batch, context, extra s, weight)
    for ld in split.slow:
        tl = timeline(ld.records)
        if tl is None:
            continue
        obs = decode_observations(tl, ld.label, costs)
        if obs:
            tpot = (tl.end - tl.first) / (tl.out - 1)
            n_waves = float(len(wave_members(tl.first, tpot)))
            extra = [o.step_s - costs.decode_step(o.batch, o.context) for o in obs]
            points.append(
                (
                    float(np.mean([o.batch for o in obs])),
                    float(np.mean([o.context for o in obs])),
                    float(np.median(extra)),
                    n_waves,
                )
            )
    if not points:
        return "no slow wave decoded two tokens"
    b, ctx, t, w = (np.asarray([p[k] for p in points]) for k in range(4))
    extra_fixed, extra_per_seq = _extra_line(b, t, w)
    fast_one = decode_step(costs, floor, 1, 0)
    for k in (int(np.argmin(b)), int(np.argmax(b))):
        fast_step = decode_step(costs, floor, b[k], ctx[k])
        slow_step = decode_step(costs, floor, b[k], ctx[k], extra_fixed, extra_per_seq)
        if slow_step < SLOWER_AT_LEAST * fast_step:
            return (
                f"the slow waves' step at batch {b[k]:.0f} ({slow_step * 1e3:.3g} ms) is not "
                f"{SLOWER_AT_LEAST:.2g}x the fast fit's ({fast_step * 1e3:.3g} ms)"
            )
    at_one = decode_step(costs, floor, 1, 0, extra_fixed, extra_per_seq)
    per_seq = costs.per_seq + extra_per_seq
    note = (
        f"two speeds: {split.slow_waves} of {split.waves} waves in {len(split.slow)} loads decoded at a "
        f"slow speed, {SPLIT_RATIO:.0f}x or more their load's fast waves"
        + _which_slow(split)
        + f"; the fast speed is fitted without them ({fast_one * 1e3:.3g} ms a step at batch 1, "
        f"+{costs.per_seq * 1e3:.3g} ms a sequence"
        + (f" past its floor of {floor * 1e3:.3g} ms" if floor > 0 else "")
        + f"), the slow one from them ({at_one * 1e3:.3g} ms at "
        f"batch 1, +{per_seq * 1e3:.3g} ms a sequence, seen at batches {b.min():.0f}-{b.max():.0f}). "
        "Which speed a load gets is not set by the load: the profile runs the fast speed, `sim --speed "
        "slow` the slow one, and --validate judges a held-out load on its requests sent after its first "
        "third ended, at the level that third ran (read from it: not a prediction)"
    )
    return SlowSpeed(extra_fixed, extra_per_seq, at_one, per_seq, (float(b.min()), float(b.max())), note)


def _extra_line(b: np.ndarray, t: np.ndarray, w: np.ndarray) -> tuple[float, float]:
    """(per step, per sequence) the slow speed adds: a weighted line over the loads' points where
    their batches differ and it rises; through zero where that line would start below zero (a
    negative extra per step is a faster engine, not a slower one); else their weighted level."""
    level = max(0.0, float(np.average(t, weights=w)))
    if b.max() - b.min() < 0.8 or len(b) < 2:
        return level, 0.0
    coef = wls(np.column_stack([np.ones_like(b), b]), t, w).coef
    if coef[1] <= 0:
        return level, 0.0
    if coef[0] >= 0:
        return float(coef[0]), float(coef[1])
    through_zero = float(np.sum(w * b * t) / np.sum(w * b * b))
    return (0.0, through_zero) if through_zero > 0 else (level, 0.0)


SLOWER_AT_LEAST = SPLIT_RATIO**0.5  # the slow step over the fast one, at least: halfway (in ratio) to 2x


def _which_slow(split: SpeedSplit) -> str:
    """Which loads the slow waves came from, in words."""
    said = f" ({', '.join(split.returned)} went back to it after running fast"
    if split.throughout:
        said += f"; {', '.join(split.throughout)} ran at it throughout"
    return said + "; every other load's slow waves came before its first fast one: a warm-up, slow)"
