"""Did one load decode at two speeds, wave by wave? Pure.

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
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tokenpace.core.analysis.calibration.engine_drift import DecodeDrift, waves
from tokenpace.core.analysis.calibration.engine_obs import MeasuredLoad, timeline

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
        f"two decode speeds at {load.label}: {slow} of its {len(ranked)} waves decoded at {slow_ms:.0f} ms "
        f"a token, the rest at {fast_ms:.0f} ms, none between ({change:+.0%}, surely {surely:+.0%}), "
        "not only at its start: this load measured an engine that switched speed, and no behaviour of "
        "the engine model says which speed a wave gets (longer steps at each load, counting slow and "
        "fast waves, would tell whether the share follows the load)"
    )
    return TwoSpeeds(load.label, len(ranked), slow, fast_ms, slow_ms, change, surely, most, note)
