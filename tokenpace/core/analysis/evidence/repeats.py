"""What a group of runs repeated under the same conditions teaches about the noise between runs. Pure."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tokenpace.core.analysis.evidence.runchange import side_levels
from tokenpace.core.analysis.evidence.runnoise import GroupNoise, group_noise, noise_key
from tokenpace.core.analysis.evidence.samples import METRICS, metric_samples
from tokenpace.core.record import RequestRecord
from tokenpace.core.stats import enough_samples

LEARNED_PERCENTILES = (50.0, 90.0, 95.0, 99.0)
# Enough for a standard error (not an interval's tails): keeps `bench --repeat` quick.
SE_RESAMPLES = 300


def repeat_noise(
    runs: Sequence[Sequence[RequestRecord]],
    percentiles: Sequence[float] = LEARNED_PERCENTILES,
    resamples: int = SE_RESAMPLES,
    seed: int = 0,
) -> list[GroupNoise]:
    """One estimate per metric percentile that every run has enough samples for (K >= 2 runs)."""
    out: list[GroupNoise] = []
    if len(runs) < 2:
        return out
    rng = np.random.default_rng(seed)
    for metric in METRICS:
        samples = [metric_samples(r, metric) for r in runs]
        qs = [q for q in percentiles if all(enough_samples(s.n, q) for s in samples)]
        if not qs:
            continue
        levels = side_levels(samples, qs, resamples, rng)
        for j, q in enumerate(qs):
            est = group_noise(noise_key(metric, q), levels.values[:, j], levels.ses[:, j])
            if est is not None:
                out.append(est)
    return out
