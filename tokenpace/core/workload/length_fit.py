"""How well sampled (input, output) lengths match the log they were drawn from. Pure."""

from __future__ import annotations

from typing import Any

import numpy as np

QUANTILES = (0.1, 0.5, 0.9, 0.99)


def ks_distance(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sample Kolmogorov-Smirnov statistic: the largest gap between the empirical CDFs."""
    a, b = np.sort(np.asarray(a, float)), np.sort(np.asarray(b, float))
    if not len(a) or not len(b):
        return 1.0
    grid = np.concatenate([a, b])
    cdf_a = np.searchsorted(a, grid, side="right") / len(a)
    cdf_b = np.searchsorted(b, grid, side="right") / len(b)
    return float(np.max(np.abs(cdf_a - cdf_b)))


def _corr(pairs: np.ndarray) -> float | None:
    if len(pairs) < 3 or np.std(pairs[:, 0]) == 0 or np.std(pairs[:, 1]) == 0:
        return None
    return float(np.corrcoef(pairs[:, 0], pairs[:, 1])[0, 1])


def length_fit(log: np.ndarray, sampled: np.ndarray) -> dict[str, Any]:
    """KS distance per marginal, a quantile table, and the input-output correlation of each side
    (a joint sample keeps it; independent marginals would lose it)."""
    log, sampled = np.asarray(log), np.asarray(sampled)
    out: dict[str, Any] = {"log_pairs": len(log), "sampled_pairs": len(sampled)}
    for col, name in ((0, "input"), (1, "output")):
        a, b = log[:, col], sampled[:, col]
        out[name] = {
            "ks": ks_distance(a, b),
            "quantiles": {
                f"p{round(q * 100)}": {"log": float(np.quantile(a, q)), "sampled": float(np.quantile(b, q))}
                for q in QUANTILES
            },
            "mean": {"log": float(a.mean()), "sampled": float(b.mean())},
        }
    out["correlation"] = {"log": _corr(log), "sampled": _corr(sampled)}
    # 1.36 / sqrt(n_eff): the KS distance two samples of the same distribution stay under at 95%.
    n_eff = len(log) * len(sampled) / max(1, len(log) + len(sampled))
    out["ks_95_threshold"] = float(1.36 / np.sqrt(n_eff)) if n_eff else None
    out["matches"] = bool(
        out["ks_95_threshold"] is not None
        and max(out["input"]["ks"], out["output"]["ks"]) <= out["ks_95_threshold"]
    )
    return out
