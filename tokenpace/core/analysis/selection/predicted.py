"""A predicted candidate in selection: a simulator's sweep (a calibrated profile run in virtual time)
judged by the same rules as a measured one, and kept apart from the measured ones. Pure.

- Its steps are placed and judged exactly as a measured sweep's (core/analysis/selection/select.py): the 95 %
  upper bound of each percentile under the line, open-loop steps for a rate scenario, the next step at
  or above the scenario's load.
- Its intervals are the summary's (sampling: one virtual run is one sample of the engine model)
  widened by twice the calibration's relative fit
  residual, the model's own error where it was fitted (upper bound x (1 + 2e), lower / (1 + 2e)).
- Attainment and goodput come from the per-request sample the predicted sweep keeps per step.
- It carries its profile's caveats (``predicted.caveats``: shown with its verdict), and a step past
  what the profile vouches for is left out: a scenario it would judge is undecided, with the reason.
- A predicted pass is not a measured one: the recommendation is made among measured candidates only;
  a predicted candidate that would be picked is said apart, with the word PREDICTED.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from tokenpace.core.analysis.selection.scenarios import Scenario
from tokenpace.core.analysis.selection.select import Cell, Verdict

PREDICTED_NOTE = (
    "a predicted pass is not a measured one: the simulator's numbers are not evidence that the "
    "engine holds the line; measure the scenario's load on it before relying on it"
)
_LATENCY_METRICS = ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms")


def widen(values: Mapping[str, float], fit_error: float) -> dict[str, float]:
    """The placed values with every latency interval widened by the fit's relative error."""
    if fit_error <= 0:
        return dict(values)
    factor = 1 + 2 * fit_error
    out = dict(values)
    for key, v in values.items():
        if key.split(".", 1)[0] not in _LATENCY_METRICS:
            continue
        if key.endswith(".hi"):
            out[key] = v * factor
        elif key.endswith(".lo"):
            out[key] = v / factor
    return out


def sample_meeting(sample: Mapping[str, Sequence[float | None]], scenario: Scenario) -> tuple[int, int]:
    """(requests meeting every TTFT, TPOT and E2E line, requests in the sample), as ``meets_lines``
    counts a measured request: ITL lines are not per request; a missing TTFT or E2E fails."""
    columns = {m: list(sample.get(f"{m}_ms") or ()) for m in ("ttft", "tpot", "e2e")}
    n = len(columns["ttft"])
    if any(len(c) != n for c in columns.values()):
        raise ValueError("the predicted sample's columns differ in length")
    good = 0
    for i in range(n):
        ok = True
        for line in scenario.slos:
            if line.metric not in columns:
                continue
            value = columns[line.metric][i]
            if value is None:
                ok = line.metric == "tpot"  # one output token has no TPOT; no TTFT/E2E is a failure
            elif value > line.threshold_ms:
                ok = False
            if not ok:
                break
        good += ok
    return good, n


def predicted_label(predicted: Mapping[str, Any]) -> str:
    """One line naming what predicted a candidate: the profile, calibrated or not, the what-if."""
    replicas = int(predicted.get("replicas") or 1)
    what_if = f", {replicas} replicas" if replicas > 1 else ""
    kind, profile = predicted.get("kind", "profile"), predicted.get("profile", "?")
    return f"PREDICTED by the simulator from the {kind} {profile}{what_if}"


def as_predicted(verdict: Verdict, caveats: Sequence[str] = (), pass_unproven: Sequence[str] = ()) -> Verdict:
    """The verdict of a predicted candidate: its kind says so, and its texts say "predicted" where a
    measured candidate's say "measured" (the next load measured above, measured at N tokens). It
    carries its profile's ``caveats``; where the profile says why no pass from it is proven
    (``pass_unproven``), a passing cell is undecided with that reason."""

    def word(text: str) -> str:
        return text.replace("measured", "predicted")

    def cell(c: Cell) -> Cell:
        c = replace(c, reason=word(c.reason))
        if c.status == "pass" and pass_unproven:
            return replace(c, status="undecided", reason=f"{c.reason}, but {'; '.join(pass_unproven)}")
        return c

    return replace(
        verdict,
        kind="predicted",
        placement=replace(verdict.placement, where=word(verdict.placement.where)),
        cells=tuple(cell(c) for c in verdict.cells),
        warnings=tuple(word(w) for w in verdict.warnings),
        caveats=tuple(caveats),
    )
