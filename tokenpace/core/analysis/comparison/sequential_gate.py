"""The release gate, looked at after every run while runs are added (``bench --repeat auto``): each
threshold judged on the always-valid interval of ``evidence/sequential``, so stopping at the first
decision keeps the false-alarm rate at alpha. Pure.

Each run's percentile and its bootstrap SE come from its records; the noise between runs is the one
learned before the first run (the library and repeat groups, shrunk toward the prior: never from the
sequence's own runs, which would make the interval depend on what it is judging).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tokenpace.core.analysis.comparison.gate import Threshold
from tokenpace.core.analysis.evidence.runchange import side_levels
from tokenpace.core.analysis.evidence.runnoise import GroupNoise, RunNoise, noise_key, pool
from tokenpace.core.analysis.evidence.samples import METRICS, metric_samples
from tokenpace.core.analysis.evidence.sequential import UNDECIDED, Look, look
from tokenpace.core.record import RequestRecord
from tokenpace.core.stats import enough_samples

SE_RESAMPLES = 200  # bootstrap resamples for one run's SE (a standard error, not an interval's tail)


@dataclass(frozen=True, slots=True)
class SeqItem:
    threshold: Threshold
    look: Look | None  # None: too few samples beyond the percentile in some run
    noise: RunNoise

    @property
    def outcome(self) -> str:
        return self.look.outcome if self.look is not None else UNDECIDED

    def reason(self) -> str:
        t = self.threshold
        if self.look is None:
            return f"too few samples for {t.name} in some run"
        lk = self.look
        return (
            f"{lk.rel:+.1%} [{lk.rel_lo:+.1%}, {lk.rel_hi:+.1%}] (always valid) against "
            f"{t.limit:.0%} allowed, {lk.runs_a} baseline run(s), {lk.runs_b} candidate run(s); "
            f"run noise {self.noise.describe()}"
        )


def _side(
    runs: Sequence[Sequence[RequestRecord]], metric: str, q: float, rng: np.random.Generator
) -> tuple[list[float], float] | None:
    """The runs' percentile values and the mean relative sampling variance of one run."""
    samples = [metric_samples(r, metric) for r in runs]
    if not samples or not all(enough_samples(s.n, q) and s.n for s in samples):
        return None
    levels = side_levels(samples, [q], SE_RESAMPLES, rng)
    values = levels.values[:, 0]
    if not np.all(values > 0):
        return None
    rel = levels.ses[:, 0] / values
    within = float(np.nanmean(rel**2)) if np.isfinite(rel).any() else 0.0
    return [float(v) for v in values], within


def sequential_gate(
    baseline: Sequence[Sequence[RequestRecord]],
    candidate: Sequence[Sequence[RequestRecord]],
    thresholds: Sequence[Threshold],
    learned: Sequence[GroupNoise],
    alpha: float = 0.05,
    rerun: str = "b",
    seed: int = 0,
) -> list[SeqItem]:
    """Every threshold at this look; ``rerun``: the sides that can still be run."""
    rng = np.random.default_rng([seed, 11])
    out = []
    for t in thresholds:
        noise = pool(noise_key(t.metric, t.q), learned)
        a, b = _side(baseline, t.metric, t.q, rng), _side(candidate, t.metric, t.q, rng)
        if a is None or b is None:
            out.append(SeqItem(t, None, noise))
            continue
        tau2 = noise.rel_sd**2
        seen = look(
            a[0], b[0], tau2 + a[1], tau2 + b[1], t.limit, alpha, METRICS[t.metric].higher_is_better,
            rerun=rerun,
        )  # fmt: skip
        out.append(SeqItem(t, seen, noise))
    return out


def decided(items: Sequence[SeqItem]) -> bool:
    """A regression decides at once; a pass needs every threshold passed."""
    return any(i.outcome == "regressed" for i in items) or all(i.outcome == "pass" for i in items)
