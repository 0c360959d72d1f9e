"""The decision rule shared by compare, check and ab: an interval against a practical threshold. Pure.

A change is called only when its confidence interval clears the threshold, never on its point
estimate: slower when the whole interval lies beyond +threshold (worse), faster beyond -threshold,
"negligible" when the whole interval lies within +-threshold, and "undecided" when the interval
holds the threshold (the data cannot tell on which side the truth lies).
"""

from __future__ import annotations

from enum import Enum

from tokenpace.core.stats import MIN_TAIL_SAMPLES, enough_samples


class Verdict(str, Enum):
    SLOWER = "slower"
    FASTER = "faster"
    UNDECIDED = "undecided"  # the interval holds the threshold: more runs would decide
    NEGLIGIBLE = "negligible"  # the whole interval lies within +-threshold
    TOO_FEW = "too few samples"


# Smallest relative change `compare` and `ab` call slower or faster by default: reruns of an
# unchanged server move TPOT P50 by about 2 % (SD) and ITL P95 by about 10 %, so a smaller change is
# not one a team would act on, and calling it would cry wolf.
DEFAULT_MIN_EFFECT = 0.05


def decision_rule(alpha: float, min_effect: float) -> str:
    return (
        f"Each percentile's change B/A - 1 gets a {100 * (1 - alpha):g}% confidence interval that "
        f"counts both the noise between requests inside each run (bootstrap over requests) and the "
        f"noise between runs of an unchanged server (learned from repeated runs, else assumed: see "
        f"'run noise'). It is called slower or faster only when the whole interval lies beyond "
        f"{100 * min_effect:g}% (the practical threshold, --min-effect); 'negligible' when it lies "
        f"within +-{100 * min_effect:g}%; otherwise 'undecided'. 'detectable' is the smallest true "
        f"change that would be called with 90% probability at this sample size and noise. The "
        f"metric's overall verdict is its P50's; the rank test (Mann-Whitney U, within runs only) is "
        f"shown, not used. No verdict on a percentile with fewer than {MIN_TAIL_SAMPLES} samples "
        f"beyond it in a run (P95 needs 100 samples, P99 500)."
    )


def worse(diff: float, higher_is_better: bool) -> bool:
    return diff < 0 if higher_is_better else diff > 0


def decide_interval(
    rel_lo: float | None,
    rel_hi: float | None,
    enough: bool,
    higher_is_better: bool,
    min_effect: float,
) -> Verdict:
    """Verdict for one percentile from the interval of its relative change B/A - 1."""
    if not enough or rel_lo is None or rel_hi is None:
        return Verdict.TOO_FEW
    if rel_lo > min_effect:
        return Verdict.FASTER if higher_is_better else Verdict.SLOWER
    if rel_hi < -min_effect:
        return Verdict.SLOWER if higher_is_better else Verdict.FASTER
    if -min_effect <= rel_lo and rel_hi <= min_effect:
        return Verdict.NEGLIGIBLE
    return Verdict.UNDECIDED


def enough_in_every_run(counts: list[int], q: float) -> bool:
    return bool(counts) and all(enough_samples(n, q) for n in counts)
