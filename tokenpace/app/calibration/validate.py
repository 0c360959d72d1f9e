"""Use case: validate a profile on held-out runs (`tokenpace sim --validate PROFILE RUN...`).

Each held-out load is replayed on the profile in virtual time (sim/virtual_time/replay.py); each
metric and percentile gets the prediction, the measurement, the error and its interval, and a verdict
(met, missed, undecided with the reason: core/analysis/calibration/verdicts.py). A verdict per load and
one for the profile (holds, fails, undecided); steps NOT VALID, interrupted, without a success or
too short are refused by name, never read.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from tokenpace.adapters.safe_files import write_atomic
from tokenpace.app.calibration.calibrate import MIN_REQUESTS, load_runs
from tokenpace.core.analysis.calibration.engine_decode_obs import decode_observations
from tokenpace.core.analysis.calibration.engine_drift import wave_members, within_load_drift
from tokenpace.core.analysis.calibration.engine_obs import (
    MeasuredLoad,
    max_decoding_at_once,
    timeline,
    usable,
)
from tokenpace.core.analysis.calibration.engine_speeds import speed_level, two_speeds
from tokenpace.core.analysis.calibration.verdicts import (
    DEFAULT_TOLERANCE,
    RowVerdict,
    combine,
    judge_row,
    profile_verdict,
)
from tokenpace.core.exit_codes import verdict_code
from tokenpace.sim.profiles.calibrated import sections_to_costs
from tokenpace.sim.profiles.limits import ProfileLimits, limits_of
from tokenpace.sim.profiles.profile import Profile
from tokenpace.sim.virtual_time.replay import Prediction, predict


@dataclass(frozen=True, slots=True)
class Row:
    prediction: Prediction
    judged: RowVerdict

    def to_dict(self) -> dict[str, Any]:
        p, v = self.prediction, self.judged
        return {
            "load": p.load,
            "metric": p.metric,
            "percentile": p.percentile,
            "predicted_ms": round(p.predicted_ms, 4),
            "predicted_interval_ms": [round(p.low_ms, 4), round(p.high_ms, 4)],
            "measured_ms": round(p.measured_ms, 4),
            "measured_interval_ms": [round(p.measured_low_ms, 4), round(p.measured_high_ms, 4)],
            "error": round(p.rel_error, 6),
            "error_interval": [_finite(v.low_error), _finite(v.high_error)],
            "verdict": v.verdict,
            "reason": v.reason,
        }


def _finite(x: float) -> float | None:
    """JSON has no infinity: an unbounded side is null."""
    return round(x, 6) if abs(x) != float("inf") else None


@dataclass
class Validation:
    profile: str
    tolerance: float
    rows: list[Row] = field(default_factory=list)
    loads: dict[str, str] = field(default_factory=dict)  # load -> met | missed | undecided
    notes: dict[str, list[str]] = field(default_factory=dict)  # per load: past the fit, KV near its limit
    refused: list[str] = field(default_factory=list)
    caveats: list[str] = field(default_factory=list)  # what the profile itself carries
    # per load, the speed it was judged at: one (the profile has one), fast, slow, both (it switched)
    speeds: dict[str, str] = field(default_factory=dict)

    @property
    def verdict(self) -> str:
        """holds | fails | undecided (undecided too when nothing could be judged, and where a load was
        judged at a speed read from itself: such a profile does not predict which speed it gets)."""
        verdict = profile_verdict(self.loads.values())
        if verdict == "holds" and any(s in ("fast", "slow") for s in self.speeds.values()):
            return "undecided"
        return verdict

    @property
    def exit_code(self) -> int:
        """0 holds, 1 fails, 5 undecided (as `check`: regressed 1, undecided 5)."""
        return int(verdict_code(self.verdict))

    def write(self, path: Path) -> None:
        """The validation as JSON (what the console shows, row for row)."""
        try:
            write_atomic(path, json.dumps(self.to_dict(), indent=1).encode())
        except OSError as e:
            raise ValueError(f"cannot write {path}: {e.strerror or e}") from None

    def to_dict(self) -> dict[str, Any]:
        return {
            "profile": self.profile,
            "tolerance": self.tolerance,
            "verdict": self.verdict,
            "loads": dict(self.loads),
            "rows": [r.to_dict() for r in self.rows],
            "notes": {k: list(v) for k, v in self.notes.items()},
            "refused": list(self.refused),
            "caveats": list(self.caveats),
            "speeds": dict(self.speeds),
        }


def validate(profile: Profile, paths: list[str], tolerance: float = DEFAULT_TOLERANCE) -> Validation:
    """Every held-out load replayed, judged per metric and percentile, per load and for the profile."""
    runs = load_runs(paths)
    loads = [(str(run.path), ld) for run in runs for ld in run.loads]
    return validate_loads(profile, loads, tolerance, [r for run in runs for r in run.refused])


def validate_loads(
    profile: Profile,
    loads: list[tuple[str, MeasuredLoad]],
    tolerance: float = DEFAULT_TOLERANCE,
    refused: list[str] | None = None,
) -> Validation:
    """validate's judgement of loads already read: (where each came from, the load)."""
    if not 0 < tolerance < 10:
        raise ValueError(f"--tolerance {tolerance:g} is not a share between 0 and 10 (e.g. 10%)")
    limits = limits_of(profile)
    slow = profile.at_slow_speed() if profile.has_slow_speed else None
    # at two speeds each load is judged at the one it ran: said so, not "the fast speed's predictions"
    out = Validation(profile.name, tolerance, caveats=replace(limits, speed="each" if slow else "").caveats())
    # A profile whose fit failed its gate is still judged here, row by row: a validation is the
    # evidence (elsewhere its predictions decide nothing).
    limits = replace(limits, poor_fit=())
    out.refused += refused or []
    for source, measured in loads:
        if len(usable(measured.records)) < MIN_REQUESTS:
            n = len(usable(measured.records))
            out.refused.append(f"{source} ({measured.label}) refused: short ({n} usable requests)")
            continue
        beyond, notes = _past_the_fit(limits, measured)
        moved, why = _moved_within(measured)
        # the prediction's own interval: the replays' spread, not widened by the fit's residual
        if slow is None or moved:  # one speed; or an engine that switched speed within the load
            predicted = predict(profile, measured, fit_error=0.0)
            out.speeds[measured.label] = "one" if slow is None else "both"
        else:  # one speed throughout, not predicted: its level from its start, the rest judged
            predicted, out.speeds[measured.label], why = _at_its_level(profile, slow, measured)
        out.notes[measured.label] = [*notes, why] if why else notes
        rows = [Row(p, _judge(p, tolerance, limits, beyond, moved)) for p in predicted]
        out.rows += rows
        out.loads[measured.label] = combine(r.judged.verdict for r in rows)
    return out


START_SHARE = 1 / 3  # of a load's requests (the first sent), whose level its other requests are judged at
MIN_LEVEL_PHASES = 5  # decode phases in that part, to read a level from


@dataclass(frozen=True, slots=True)
class Level:
    extra_ms: float  # over the fast speed, on every step
    skip: int  # the requests that set it: replayed, not judged
    speed: str  # fast | slow: the fitted speed the level lies nearer
    note: str


def level_from_start(profile: Profile, measured: MeasuredLoad) -> Level | str:
    """The level a load of an engine seen at two speeds ran at, read from its first START_SHARE of
    requests (their decode phases against the fast law, every request counted in their batches), to
    judge at it only the requests sent after those had all ended: the engine's speed is not predicted,
    no request both sets it and is judged, and no judged request decoded beside one setting it. A
    reason (str) where the load is too short for that."""
    ok = usable(measured.records)
    setting = int(len(ok) * START_SHARE)
    done = max((r.end_ns or 0 for r in ok[:setting]), default=0)
    skip = next((i for i, r in enumerate(ok) if i >= setting and r.sent_ns > done), len(ok))
    if len(ok) - skip < MIN_REQUESTS:
        return (
            f"too short to set its level from its first {setting} requests and judge {MIN_REQUESTS} or more "
            f"sent after they ended ({len(ok) - skip})"
        )
    tl = timeline(ok)
    costs, floor = sections_to_costs(profile), profile.efficiency.step_floor_ms / 1e3
    obs = decode_observations(tl, measured.label, costs, only_first=setting) if tl is not None else []
    if len(obs) < MIN_LEVEL_PHASES:
        return f"its first {setting} requests held {len(obs)} decode phases ({MIN_LEVEL_PHASES} needed)"
    extra = speed_level(obs, costs, floor) * 1e3
    slow = profile.efficiency.slow_step_extra_ms
    speed = "slow" if extra > 0.5 * slow else "fast"
    note = (
        f"judged on its {len(ok) - skip} requests sent after its first {setting} ended, at the level those "
        f"ran: {extra:+.3g} ms a step over the fast speed (the slow speed adds {slow:+.3g}: nearer the "
        f"{speed}); which speed a load gets is not predicted, so its first requests set it and are not judged"
    )
    return Level(extra, skip, speed, note)


def _moved_within(measured: MeasuredLoad) -> tuple[str, str]:
    """(the verdicts' reason where the engine moved within the load, "" if not; the note to print)."""
    drift, speeds = within_load_drift(measured), two_speeds(measured)
    if drift.moved:
        return f"engine moved {drift.change:+.0%} within this load (surely {drift.low:+.0%})", drift.note
    if speeds is not None:  # back and forth between two speeds: a move, sized by its waves
        moved = (
            f"engine moved within this load: {speeds.slow_waves} of {speeds.waves} waves decoded "
            f"{speeds.change:+.0%} slower than the rest (surely {speeds.surely:+.0%})"
        )
        return moved, speeds.note
    return "", ""


def _at_its_level(
    profile: Profile, slow: Profile, measured: MeasuredLoad
) -> tuple[list[Prediction], str, str]:
    """(predictions, the speed it was judged at, why) for a load of an engine seen at two speeds that
    held one: at the level its first third ran, judged on the rest; too short for that, at the fitted
    speed nearer its waves."""
    level = level_from_start(profile, measured)
    if isinstance(level, Level):
        return predict(profile.at_level(level.extra_ms), measured, skip=level.skip), level.speed, level.note
    fast, at_slow = predict(profile, measured), predict(slow, measured)
    ran, note = speed_ran(measured, fast, at_slow)
    return (at_slow if ran == "slow" else fast), ran, f"{level}; {note}"


def speed_ran(measured: MeasuredLoad, fast: list[Prediction], slow: list[Prediction]) -> tuple[str, str]:
    """("fast" | "slow", why): the speed whose predicted median time per output token lies nearer (in
    ratio) the median of the load's waves, each wave of users in lock step one observation."""
    tl = timeline(measured.records)
    f = next((p.predicted_ms for p in fast if p.metric == "tpot" and p.percentile == 50), 0.0)
    s = next((p.predicted_ms for p in slow if p.metric == "tpot" and p.percentile == 50), 0.0)
    if tl is None or not (f > 0 and s > 0):  # no wave, or a prediction without a median TPOT
        return "fast", "judged at the fast speed (nothing to tell which speed it ran at)"
    tpot = (tl.end - tl.first) / (tl.out - 1)
    waves = np.asarray([float(np.median(tpot[m])) for m in wave_members(tl.first, tpot)]) * 1e3
    median = float(np.median(waves))
    ran = "slow" if abs(np.log(median / s)) < abs(np.log(median / f)) else "fast"
    why = (
        f"ran at the {ran} speed throughout: its {len(waves)} waves decoded at {waves.min():.3g}-"
        f"{waves.max():.3g} ms a token (median {median:.3g}), where the fast speed predicts a median of "
        f"{f:.3g} ms and the slow {s:.3g}; judged against the {ran} speed's prediction (the speed chosen "
        "from its own waves: which speed a load gets is not predicted)"
    )
    return ran, why


def _judge(
    p: Prediction, tolerance: float, limits: ProfileLimits, beyond: str, moved: str = ""
) -> RowVerdict:
    return judge_row(
        (p.low_ms, p.high_ms),
        (p.measured_low_ms, p.measured_high_ms),
        p.enough,
        tolerance,
        engine_moved=limits.engine_moved,
        beyond=beyond,
        moved_within=moved,
    )


def in_flight_at_most(measured: MeasuredLoad) -> int:
    """The most requests in flight at once (sent to last byte) in a measured load."""
    events = []
    for r in usable(measured.records):
        events += [(r.sent_ns, 1), (r.end_ns or r.sent_ns, -1)]
    events.sort(key=lambda ev: (ev[0], ev[1]))
    now = best = 0
    for _, delta in events:
        now += delta
        best = max(best, now)
    return best


def _past_the_fit(limits: ProfileLimits, measured: MeasuredLoad) -> tuple[str, list[str]]:
    """(why the load lies past what the profile vouches for, "" if it does not; notes to print)."""
    tl = timeline(measured.records)
    if tl is None:
        return "", []
    beyond = limits.beyond(in_flight_at_most(measured), float(tl.prompt.max()), max_decoding_at_once(tl))
    notes = [beyond] if beyond else []
    if measured.server_max_kv_usage is not None and measured.server_max_kv_usage >= 0.9:
        notes.append(
            f"KV cache at {measured.server_max_kv_usage:.0%}: near its limit, which was not calibrated"
        )
    return beyond, notes
