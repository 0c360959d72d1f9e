"""The decision rule shared by compare, check and ab. Pure."""

from __future__ import annotations

from enum import Enum

from tokenpace.core.analysis.bootstrap import DiffEstimate
from tokenpace.core.stats import MIN_TAIL_SAMPLES, enough_samples


class Verdict(str, Enum):
    SLOWER = "slower"
    FASTER = "faster"
    NO_DIFFERENCE = "no significant difference"
    NEGLIGIBLE = "negligible"  # significant, but smaller than the minimum effect
    TOO_FEW = "too few samples"


def decision_rule(alpha: float, min_effect: float) -> str:
    return (
        f"A percentile differs when the {100 * (1 - alpha):g}% bootstrap confidence interval of "
        f"B - A (resampling requests) excludes zero; it is called slower or faster only when the "
        f"relative change is also at least {100 * min_effect:g}% (smaller significant changes are "
        f"'negligible'). The rank test (Mann-Whitney U) asks whether the whole distribution shifted "
        f"and gives the metric's overall verdict under the same two conditions. No verdict on a "
        f"percentile with fewer than {MIN_TAIL_SAMPLES} samples beyond it on either side "
        f"(P95 needs 100 samples, P99 500). A regression needs both an effect above its threshold "
        f"and significance."
    )


def worse(diff: float, higher_is_better: bool) -> bool:
    return diff < 0 if higher_is_better else diff > 0


def decide(
    est: DiffEstimate,
    n_a: int,
    n_b: int,
    q: float,
    higher_is_better: bool,
    min_effect: float,
    significant: bool | None = None,
) -> Verdict:
    """Verdict for one percentile. Significant, unless given: ``est``'s interval excludes zero."""
    if not (enough_samples(n_a, q) and enough_samples(n_b, q)):
        return Verdict.TOO_FEW
    if significant is None:
        significant = est.lo > 0 or est.hi < 0
    if not significant:
        return Verdict.NO_DIFFERENCE
    if est.rel is not None and abs(est.rel) < min_effect:
        return Verdict.NEGLIGIBLE
    return Verdict.SLOWER if worse(est.diff, higher_is_better) else Verdict.FASTER


def decide_shift(
    p_value: float | None,
    b_tends_larger: bool,
    rel_median: float | None,
    enough: bool,
    higher_is_better: bool,
    alpha: float,
    min_effect: float,
) -> Verdict:
    """Overall verdict for a metric from its rank test and the relative change of its median."""
    if not enough or p_value is None:
        return Verdict.TOO_FEW
    if p_value >= alpha:
        return Verdict.NO_DIFFERENCE
    if rel_median is not None and abs(rel_median) < min_effect:
        return Verdict.NEGLIGIBLE
    larger_is_worse = not higher_is_better
    return Verdict.SLOWER if b_tends_larger == larger_is_worse else Verdict.FASTER
