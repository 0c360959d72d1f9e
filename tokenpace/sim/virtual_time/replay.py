"""Replay a measured load in virtual time on a profile: what the profile predicts for it, and how sure.

An open loop is replayed as it was sent: the same requests (prompt and output lengths) at the same
send times, so only the engine model can differ. A closed loop is replayed with the same users and
request count, lengths drawn from those the run had. Each replay runs with several seeds (the round
trip's jitter, and a closed loop's length draws, change); the prediction is the mean over seeds and
its interval the 95 % prediction interval of one more run's value (mean +- t x sd x sqrt(1 + 1/seeds)),
widened by twice `fit_error` where a caller asks (`--validate` does not: core/analysis/calibration/
verdicts.py) and never below zero. Each row also carries the measured percentile's distribution-free
95 % interval and whether enough requests lie beyond it to bound it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tokenpace.core.analysis.calibration.engine_obs import MeasuredLoad, prompt_of, usable
from tokenpace.core.analysis.selection.prefill_fit import _t975 as t975
from tokenpace.core.metrics import NS_PER_S, e2e_ns, tpot_ns, ttft_ns
from tokenpace.core.stats import enough_samples, percentile_cis
from tokenpace.core.workload.lengths import LengthDist
from tokenpace.sim.profiles.profile import Profile
from tokenpace.sim.virtual_time.virtual import VirtualResult, run_virtual
from tokenpace.sim.virtual_time.virtual_load import VirtualLoad

METRICS = ("ttft", "tpot", "e2e")
PERCENTILES = (50, 95)
REPLAY_SEEDS = 5
MAX_DISTINCT_LENGTHS = 512  # a length mix wider than this is binned to this many values


@dataclass(frozen=True, slots=True)
class Prediction:
    load: str
    metric: str  # ttft | tpot | e2e
    percentile: int
    predicted_ms: float
    low_ms: float
    high_ms: float
    measured_ms: float
    # the measured percentile's distribution-free 95 % interval, and whether enough requests lay
    # beyond the percentile to bound it (core.stats)
    measured_low_ms: float = 0.0
    measured_high_ms: float = 0.0
    enough: bool = True

    @property
    def rel_error(self) -> float:
        return (self.predicted_ms - self.measured_ms) / self.measured_ms if self.measured_ms else 0.0

    @property
    def inside(self) -> bool:
        slack = 1e-6 * abs(self.measured_ms)  # an exact replay differs only by nanosecond rounding
        return self.low_ms - slack <= self.measured_ms <= self.high_ms + slack


def empirical_lengths(values: Sequence[int], label: str) -> LengthDist:
    """The lengths a run had, as a weighted mix (exact when few distinct values)."""
    counts = Counter(int(v) for v in values)
    if len(counts) > MAX_DISTINCT_LENGTHS:
        edges = np.quantile(np.asarray(values, dtype=float), np.linspace(0, 1, MAX_DISTINCT_LENGTHS))
        counts = Counter(round(float(v)) for v in edges)
    keys = sorted(counts)
    return LengthDist("mix", tuple(float(k) for k in keys), tuple(float(counts[k]) for k in keys), label)


def replay_load(measured: MeasuredLoad, seed: int = 0) -> VirtualLoad:
    """The virtual load that sends what the measured load sent."""
    ok = usable(measured.records)
    if not ok:
        raise ValueError(f"{measured.label}: no successful streamed request to replay")
    inputs = empirical_lengths([prompt_of(r) for r in ok], "measured prompts")
    outputs = empirical_lengths([r.output_tokens for r in ok], "measured outputs")
    if measured.rate:  # the same requests at the same send times: only the engine model may differ
        t0 = min(r.sent_ns for r in ok)
        sends = tuple(((r.sent_ns - t0) / NS_PER_S, prompt_of(r), r.output_tokens) for r in ok)
        return VirtualLoad(inputs, outputs, sends=tuple(sorted(sends)), seed=seed)
    users = measured.concurrency or 1
    return VirtualLoad(inputs, outputs, concurrency=users, requests=len(ok), seed=seed)


def _percentiles_ms(values: list[float]) -> dict[int, float]:
    arr = np.asarray(values, dtype=float)
    return {p: float(np.percentile(arr, p)) for p in PERCENTILES} if len(arr) else {}


def _measured_bounds(values: list[float]) -> dict[int, tuple[float, float, bool]]:
    """Per percentile: its 95 % interval and whether enough requests lie beyond it."""
    arr = np.sort(np.asarray(values, dtype=float))
    if not len(arr):
        return {}
    cis = percentile_cis(arr, PERCENTILES)
    return {p: (lo, hi, enough_samples(len(arr), p)) for p, (lo, hi) in zip(PERCENTILES, cis, strict=True)}


def _virtual_values(results: list[VirtualResult]) -> dict[str, list[float]]:
    tpot = [r.tpot for r in results]
    return {
        "ttft": [r.ttft * 1e3 for r in results],
        "tpot": [t * 1e3 for t in tpot if t is not None],
        "e2e": [r.e2e * 1e3 for r in results],
    }


def _measured_values(measured: MeasuredLoad, skip: int = 0) -> dict[str, list[float]]:
    ok = usable(measured.records)[skip:]
    return {
        "ttft": [(ttft_ns(r) or 0) / 1e6 for r in ok],
        "tpot": [t / 1e6 for r in ok if (t := tpot_ns(r)) is not None],
        "e2e": [(e2e_ns(r) or 0) / 1e6 for r in ok],
    }


def predict(
    profile: Profile, measured: MeasuredLoad, fit_error: float = 0.0, seeds: int = REPLAY_SEEDS,
    skip: int = 0,
) -> list[Prediction]:  # fmt: skip
    """Per metric and percentile: the replays' median, their range widened by 2 x fit_error, and
    the measured value; `skip`: the first requests sent are replayed but not judged, in the
    replays and the measurement alike."""
    per_seed = []
    for seed in range(seeds):
        load = replay_load(measured, seed)
        done = sorted(run_virtual(load, profile), key=lambda r: r.sent)[skip:]
        per_seed.append({m: _percentiles_ms(v) for m, v in _virtual_values(done).items()})
    values = _measured_values(measured, skip)
    meas = {m: _percentiles_ms(v) for m, v in values.items()}
    bounds = {m: _measured_bounds(v) for m, v in values.items()}
    out = []
    for m in METRICS:
        for p in PERCENTILES:
            vals = [s[m][p] for s in per_seed if s.get(m)]
            if not vals or p not in meas.get(m, {}):
                continue
            low, mid, high = _interval(vals, fit_error)
            m_lo, m_hi, enough = bounds[m][p]
            out.append(Prediction(measured.label, m, p, mid, low, high, meas[m][p], m_lo, m_hi, enough))
    return out


def _interval(vals: list[float], fit_error: float) -> tuple[float, float, float]:
    """(low, mean, high): where one more run's value falls (95 %), widened by the fit's error."""
    mid = float(np.mean(vals))
    half = 0.0
    if len(vals) > 1:
        half = t975(len(vals) - 1) * float(np.std(vals, ddof=1)) * (1 + 1 / len(vals)) ** 0.5
    widen = 1 + 2 * fit_error
    return max(0.0, (mid - half) / widen), mid, (mid + half) * widen
