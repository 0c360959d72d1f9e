"""The release gate, looked at after every run while runs are added (``bench --repeat auto``): each
threshold judged on the always-valid interval of ``evidence/sequential``, so stopping at the first
decision keeps the false-alarm rate at alpha. Pure.

Each run's percentile and its bootstrap SE come from its records; the noise between runs is the
upper bound of the one learned before the first run (the library and repeat groups under the same
host conditions, shrunk toward the prior: never pooled with the sequence's own runs, which would
make the interval depend on what it is judging), raised to what the sides' own runs show where they
show more (``gate_noise``): a wider interval only. A pass never rests on an assumed noise alone.
Each undecided look says what would decide it for both sides (``side_needs``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tokenpace.core.analysis.comparison.gate import Threshold
from tokenpace.core.analysis.evidence.gate_noise import gate_noise
from tokenpace.core.analysis.evidence.runchange import side_levels
from tokenpace.core.analysis.evidence.runnoise import (
    MAX_RUNS_ADVISED,
    GroupNoise,
    RunNoise,
    group_noise,
    noise_key,
)
from tokenpace.core.analysis.evidence.samples import METRICS, metric_samples
from tokenpace.core.analysis.evidence.sequential import PASS, UNDECIDED, Look, SideNeeds, look, side_needs
from tokenpace.core.record import RequestRecord
from tokenpace.core.stats import enough_samples

SE_RESAMPLES = 200  # bootstrap resamples for one run's SE (a standard error, not an interval's tail)


@dataclass(frozen=True, slots=True)
class SeqItem:
    threshold: Threshold
    look: Look | None  # None: too few samples beyond the percentile in some run
    noise: RunNoise
    needs: SideNeeds | None = None  # what would decide it, side by side (None: decided or no look)

    @property
    def outcome(self) -> str:
        if self.look is None or (self.look.outcome == PASS and self.noise.rests_on_assumption):
            return UNDECIDED
        return self.look.outcome

    def reason(self) -> str:
        t = self.threshold
        if self.look is None:
            return f"too few samples for {t.name} in some run"
        lk = self.look
        held = (
            "; within the threshold only at an assumed noise between runs: a pass needs it measured"
            if lk.outcome == PASS and self.outcome == UNDECIDED
            else ""
        )
        return (
            f"{lk.rel:+.1%} [{lk.rel_lo:+.1%}, {lk.rel_hi:+.1%}] (always valid) against "
            f"{t.limit:.0%} allowed, {lk.runs_a} baseline run(s), {lk.runs_b} candidate run(s); "
            f"run noise {self.noise.describe()}{held}"
        )


def _side(
    runs: Sequence[Sequence[RequestRecord]], metric: str, q: float, rng: np.random.Generator
) -> tuple[list[float], float, GroupNoise | None] | None:
    """The runs' percentile values, the mean relative sampling variance of one run, and the noise
    between them they show (two runs or more)."""
    samples = [metric_samples(r, metric) for r in runs]
    if not samples or not all(enough_samples(s.n, q) and s.n for s in samples):
        return None
    levels = side_levels(samples, [q], SE_RESAMPLES, rng)
    values = levels.values[:, 0]
    if not np.all(values > 0):
        return None
    rel = levels.ses[:, 0] / values
    within = float(np.nanmean(rel**2)) if np.isfinite(rel).any() else 0.0
    shown = group_noise(noise_key(metric, q), values, levels.ses[:, 0])
    return [float(v) for v in values], within, shown


def sequential_gate(
    baseline: Sequence[Sequence[RequestRecord]],
    candidate: Sequence[Sequence[RequestRecord]],
    thresholds: Sequence[Threshold],
    learned: Sequence[GroupNoise],
    alpha: float = 0.05,
    rerun: str = "b",
    seed: int = 0,
    host: str | None = None,
    budget: int = 0,
) -> list[SeqItem]:
    """Every threshold at this look; ``rerun``: the sides that can still be run; ``host``: the
    sides' host condition (only estimates learned under it count; None: all); ``budget``: the
    candidate runs the sequence may reach (what baseline runs would decide is counted at it)."""
    rng = np.random.default_rng([seed, 11])
    out = []
    for t in thresholds:
        key = noise_key(t.metric, t.q)
        a, b = _side(baseline, t.metric, t.q, rng), _side(candidate, t.metric, t.q, rng)
        if a is None or b is None:
            out.append(SeqItem(t, None, gate_noise(key, learned, [], host)))
            continue
        shown = [g for g in (a[2], b[2]) if g is not None]
        noise = gate_noise(key, learned, shown, host, pool_current=False)
        tau2, better = noise.rel_sd**2, METRICS[t.metric].higher_is_better
        seen = look(a[0], b[0], tau2 + a[1], tau2 + b[1], t.limit, alpha, better, rerun=rerun)
        needs = side_needs(seen, tau2 + a[1], tau2 + b[1], t.limit, alpha, better, candidate_budget=budget)
        out.append(SeqItem(t, seen, noise, needs if seen.outcome == UNDECIDED else None))
    return out


def decided(items: Sequence[SeqItem]) -> bool:
    """A regression decides at once; a pass needs every threshold passed."""
    return any(i.outcome == "regressed" for i in items) or all(i.outcome == "pass" for i in items)


def baseline_limits(items: Sequence[SeqItem], budget: int) -> list[SeqItem]:
    """The undecided thresholds that candidate runs alone cannot decide within ``budget`` candidate
    runs in all, where baseline runs would: the baseline must grow first."""
    out = []
    for i in items:
        needs, lk = i.needs, i.look
        if i.outcome != UNDECIDED or needs is None or lk is None or needs.baseline is None:
            continue
        if needs.candidate is None or lk.runs_b + needs.candidate > budget:
            out.append(i)
    return out


def side_to_run(items: Sequence[SeqItem], budget: int, baseline_left: int, candidate_left: int) -> str | None:
    """The side whose next run the undecided gate needs: "a" (the baseline) where candidate runs
    alone cannot decide some threshold within ``budget`` candidate runs in all (or neither side
    alone can), "b" (the candidate) otherwise; the other side where the one needed has no runs
    left (any run narrows the interval), but never a candidate run where no number of them would
    decide; None when decided or nothing left would help. The choice reads only the runs so far,
    so the always-valid interval stays valid under it."""
    if items and decided(items):
        return None
    if not items or all(i.look is None for i in items):  # no look yet (too few samples): the candidate
        return "b" if candidate_left > 0 else None
    limited = bool(baseline_limits(items, budget)) or any(
        i.outcome == UNDECIDED and i.needs is not None and i.needs.limiting == "both" for i in items
    )
    order = ("a", "b") if limited else ("b", "a")
    left = {"a": baseline_left, "b": candidate_left}
    side = next((s for s in order if left[s] > 0), None)
    if side == "b" and baseline_limits(items, MAX_RUNS_ADVISED):
        return None  # no number of candidate runs would decide: the baseline must grow first
    return side
