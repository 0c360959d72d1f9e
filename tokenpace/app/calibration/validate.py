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
from tokenpace.core.analysis.calibration.engine_drift import wave_members, within_load_drift
from tokenpace.core.analysis.calibration.engine_obs import (
    MeasuredLoad,
    max_decoding_at_once,
    timeline,
    usable,
)
from tokenpace.core.analysis.calibration.engine_speeds import two_speeds
from tokenpace.core.analysis.calibration.verdicts import (
    DEFAULT_TOLERANCE,
    RowVerdict,
    combine,
    judge_row,
    profile_verdict,
)
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
        """holds | fails | undecided (undecided too when nothing could be judged)."""
        return profile_verdict(self.loads.values())

    @property
    def exit_code(self) -> int:
        """0 holds, 1 fails, 2 undecided (as `check`: regressed 1, undecided 2)."""
        return {"holds": 0, "fails": 1}.get(self.verdict, 2)

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
    if not 0 < tolerance < 10:
        raise ValueError(f"--tolerance {tolerance:g} is not a share between 0 and 10 (e.g. 10%)")
    limits = limits_of(profile)
    slow = profile.at_slow_speed() if profile.has_slow_speed else None
    # at two speeds each load is judged at the one it ran: said so, not "the fast speed's predictions"
    out = Validation(profile.name, tolerance, caveats=replace(limits, speed="each" if slow else "").caveats())
    # A profile whose fit failed its gate is still judged here, row by row: a validation is the
    # evidence (elsewhere its predictions decide nothing).
    limits = replace(limits, poor_fit=())
    for run in load_runs(paths):
        out.refused += run.refused
        for measured in run.loads:
            if len(usable(measured.records)) < MIN_REQUESTS:
                n = len(usable(measured.records))
                out.refused.append(f"{run.path} ({measured.label}) refused: short ({n} usable requests)")
                continue
            beyond, notes = _past_the_fit(limits, measured)
            drift, speeds = within_load_drift(measured), two_speeds(measured)
            if drift.moved:
                moved = f"engine moved {drift.change:+.0%} within this load (surely {drift.low:+.0%})"
                notes = [*notes, drift.note]
            elif speeds is not None:  # back and forth between two speeds: a move, sized by its waves
                moved = (
                    f"engine moved within this load: {speeds.slow_waves} of {speeds.waves} waves decoded "
                    f"{speeds.change:+.0%} slower than the rest (surely {speeds.surely:+.0%})"
                )
                notes = [*notes, speeds.note]
            else:
                moved = ""
            # the prediction's own interval: the replays' spread, not widened by the fit's residual
            predicted = predict(profile, measured, fit_error=0.0)
            out.speeds[measured.label] = "fast" if slow is not None else "one"
            if slow is not None and not moved:  # one speed throughout: which one, from its waves
                at_slow = predict(slow, measured, fit_error=0.0)
                ran, note = speed_ran(measured, predicted, at_slow)
                out.speeds[measured.label] = ran
                notes = [*notes, note]
                if ran == "slow":
                    predicted = at_slow
            elif slow is not None:
                out.speeds[measured.label] = "both"
            out.notes[measured.label] = notes
            rows = [Row(p, _judge(p, tolerance, limits, beyond, moved)) for p in predicted]
            out.rows += rows
            out.loads[measured.label] = combine(r.judged.verdict for r in rows)
    return out


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
