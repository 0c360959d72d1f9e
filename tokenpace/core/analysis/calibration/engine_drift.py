"""Did the engine's decode speed move during the calibration sweep? Pure.

A sweep revisits its first step after its last (`sweep --revisit`): the same load, so the same
time per output token, unless the engine itself got faster or slower meanwhile (another process on
its cores, a CPU's clock). The sweep's own drift check compares TTFT and E2E against the range they
span across its steps, which a concurrency-1 step's decode barely moves; a calibration fits the
step costs of loads run minutes apart, so a move there is a floor under how closely any profile
fitted to them can predict. On llama-server's CI runs the revisit decoded 40 % slower than the
first pass, a minute later, and the held-out loads ran slower still.

Decided by intervals (a revisit, or the first and last thirds of one load: `within_load_drift`): the
95 % distribution-free intervals of the two passes' median time per
output token (from their ranks) do not overlap. Otherwise undecided, and said so.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from tokenpace.core.analysis.calibration.engine_obs import MeasuredLoad, Timeline, timeline, usable
from tokenpace.core.stats import percentile_ci

MIN_REQUESTS = 10  # per pass: fewer give a median interval too wide to decide anything


@dataclass(frozen=True, slots=True)
class DecodeDrift:
    load: str
    change: float  # median time per output token, revisit over first pass, less 1
    low: float  # the change's bounds from the two medians' 95 % intervals
    high: float
    moved: bool  # the intervals do not overlap
    note: str  # what the calibration says about it


def decode_drift(first: MeasuredLoad, again: MeasuredLoad) -> DecodeDrift:
    """The change of the median time per output token from a load's first pass to its revisit."""
    a, b = _tpot(first), _tpot(again)
    if len(a) < MIN_REQUESTS or len(b) < MIN_REQUESTS:
        nan = float("nan")
        note = (
            f"decode speed at {first.label}: not checked, {len(a)} and {len(b)} requests decoded two or "
            f"more tokens in the first pass and the revisit, fewer than {MIN_REQUESTS} in one of them "
            "(more requests per step would let the revisit say whether the engine moved)"
        )
        return DecodeDrift(first.label, nan, nan, nan, False, note)
    a_lo, a_hi = percentile_ci(a, 50)
    b_lo, b_hi = percentile_ci(b, 50)
    change = float(np.median(b) / np.median(a) - 1)
    low, high = b_lo / a_hi - 1, b_hi / a_lo - 1
    moved = b_lo > a_hi or b_hi < a_lo
    span = f"{change:+.0%} (95 % bounds {low:+.0%} to {high:+.0%})"
    if moved:
        note = (
            f"the engine's decode step moved {span} between {first.label}'s first pass and its revisit "
            "after the sweep's last step: the engine changed speed while it was calibrated, and "
            "predictions hold no closer than that (a quiet host, or pinned cores, would decide more)"
        )
    else:
        note = (
            f"decode speed at {first.label}: revisit {span}, no move decided (undecided below the "
            "bounds' width; more requests per pass would narrow them)"
        )
    return DecodeDrift(first.label, change, low, high, moved, note)


def _tpot(load: MeasuredLoad) -> np.ndarray:
    tl = timeline(load.records)
    if tl is None:
        return np.zeros(0)
    return np.sort((tl.end - tl.first) / (tl.out - 1))


MAX_SEGMENTS = 10  # a load cut by send time into at most this many parts of PART_WAVES or more
PART_WAVES = 5  # waves (independent observations) a part needs: its median's interval is their range
MIN_MOVE = 0.20  # a move inside a load is declared only when surely this large (see within_load_drift)


def within_load_drift(load: MeasuredLoad) -> DecodeDrift:
    """Did the engine hold still *inside* one load? The load's requests cut by send time into parts
    (as many as give PART_WAVES observations each, at most MAX_SEGMENTS), the drain left out
    (requests that ended after the last send: the load was falling), and requests whose first tokens
    came in the same step one observation (wave_tpots); the engine moved when the slowest
    part's median time per output token is surely (the highest lower bound of the parts' medians' 95 %
    intervals over the lowest upper bound) MIN_MOVE or more above the fastest's.

    The margin because even so the steps of neighbouring observations overlap, and their intervals
    are too narrow; a change under 20 % is left undecided. A load
    whose speed moved inside itself measured two engines, not one: a fit to it, or a prediction
    judged against it, mixes them (on the H200 records each step's first wave decoded at ~80-100 ms
    a token against ~22 ms later, and the 64-user step went from 98 ms to 33 ms and back)."""
    nan = float("nan")
    tl = timeline(load.records)
    if tl is None:
        return DecodeDrift(load.label, nan, nan, nan, False, "")
    tpot = wave_tpots(tl)
    k = min(MAX_SEGMENTS, len(tpot) // PART_WAVES)
    if k < 2:
        note = (
            f"whether the engine held still within {load.label}: not checked, {len(tpot)} independent "
            f"observations (requests starting to decode in different steps; two parts of {PART_WAVES} "
            "or more needed: a longer step, or users out of lock step, would decide it)"
        )
        return DecodeDrift(load.label, nan, nan, nan, False, note)
    parts = [np.sort(p) for p in np.array_split(tpot, k)]
    medians = [float(np.median(p)) for p in parts]
    cis = [percentile_ci(p, 50) for p in parts]
    # the surely slowest part (highest lower bound) against the surely fastest (lowest upper bound)
    s_lo = max(lo for lo, _ in cis)
    f_hi = min(hi for _, hi in cis)
    change = max(medians) / min(medians) - 1
    low, high = s_lo / f_hi - 1, max(hi for _, hi in cis) / min(lo for lo, _ in cis) - 1
    moved = low >= MIN_MOVE
    span = f"{change:+.0%} (95 % bounds {low:+.0%} to {high:+.0%})"
    note = (
        f"the engine moved within {load.label}: the slowest of its {k} parts (by send time) decoded "
        f"{span} against the fastest; that load measured an engine that did not hold still"
        if moved
        else f"{load.label}: no move decided within it (slowest of {k} parts {span} against the "
        f"fastest, {MIN_MOVE:.0%} needed surely)"
    )
    return DecodeDrift(load.label, change, low, high, moved, note)


def wave_tpots(tl: Timeline) -> np.ndarray:
    """Time per output token, one value per wave, in send order, the drain left out (waves)."""
    return waves(tl)[1]


def waves(tl: Timeline) -> tuple[np.ndarray, np.ndarray]:
    """(each wave's first send, its time per output token), in send order, the drain left out.

    A closed loop's users in lock step start decoding in the same step and share every step after:
    their TPOTs are one observation, not many (counted as many, a wave of 16 equal values gives a
    median an interval of zero width). Requests whose first tokens came within half a step of the
    wave's first are one wave (anchored, so a steady stream of newcomers does not chain into one);
    its value is their median."""
    steady = tl.end <= tl.sent.max()  # after the last send the load was falling
    tpot, sent = ((tl.end - tl.first) / (tl.out - 1))[steady], tl.sent[steady]
    found = sorted(
        (float(sent[m].min()), float(np.median(tpot[m]))) for m in wave_members(tl.first[steady], tpot)
    )  # (first send of the wave, its median TPOT)
    return np.asarray([s for s, _ in found]), np.asarray([v for _, v in found])


def wave_members(first: np.ndarray, tpot: np.ndarray) -> list[np.ndarray]:
    """The requests (indices) of each wave: first tokens within half a median TPOT of the wave's first."""
    if len(first) == 0:
        return []
    tol = 0.5 * float(np.median(tpot))
    order = np.argsort(first, kind="stable")
    out, start = [], 0
    for i in range(1, len(order) + 1):
        if i == len(order) or first[order[i]] - first[order[start]] > tol:  # from the wave's first
            out.append(order[start:i])
            start = i
    return out


def steady_part(load: MeasuredLoad) -> tuple[MeasuredLoad, DecodeDrift, str]:
    """The load less a warm-up, its drift verdict, and what was trimmed ("" when nothing).

    A warm-up: the engine moved within the load, its start was slower than the rest (the first part,
    or a closed loop's first wave: its users all start at once, their prefills in each other's
    decode steps), and without it the rest held still; the start is then left out (as a bench's
    --warmup would have), and said so. A load that moves otherwise is returned whole with its verdict."""
    d = within_load_drift(load)
    if not d.moved:
        return load, d, ""
    ok = usable(load.records)
    tl = timeline(load.records)
    assert tl is not None  # moved: it had requests
    tpot = (tl.end - tl.first) / (tl.out - 1)
    steady = tl.end <= tl.sent.max()  # the drain left out, as within_load_drift does
    k = min(MAX_SEGMENTS, int(steady.sum()) // MIN_REQUESTS)
    cut = max(len(np.array_split(tpot[steady], k)[0]), load.concurrency or 0)
    after = tpot[cut:][steady[cut:]]
    if len(after) < 2 * MIN_REQUESTS or float(np.median(tpot[:cut])) <= float(np.median(after)):
        return load, d, ""
    rest = replace(load, records=tuple(ok[cut:]))
    d2 = within_load_drift(rest)
    if d2.moved or d2.note.startswith("whether"):
        return load, d, ""
    slower = float(np.median(tpot[:cut]) / np.median(after) - 1)
    note = (
        f"warm-up at {load.label}: its first {cut} requests decoded {slower:+.0%} slower than the rest, "
        "which held still; left out of the fit (a sweep with --warmup would leave them out itself)"
    )
    return rest, d2, note
