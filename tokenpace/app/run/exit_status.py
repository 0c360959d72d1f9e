"""How a bench run or a sweep ends, as an exit status: one decision, made here, that the jobs report
(``BenchOutcome.exit_status``, ``SweepOutcome.exit_status``) and the commands exit with. The codes
are the one table of core/exit_codes.py (docs/exit-codes.md): 0 measured, 1 aborted, 2 not stored,
3 NOT VALID, 4 no success, 130 / 143 interrupted. A ``--fail-on`` gate decides only a run that
ended 0 (0 pass, 1 fail, 5 undecided).

When several apply, the first in this order wins: interrupted, error, not stored, no success, not valid.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tokenpace.app.run.outputs import ExitStatus, stopped_status
from tokenpace.core.analysis.comparison.fail_on_judge import FailOnReport
from tokenpace.core.exit_codes import verdict_code, worst

OK, ERROR, BAD_INPUT = ExitStatus.OK, ExitStatus.ABORTED, ExitStatus.REFUSED
NOT_VALID, NO_SUCCESS = ExitStatus.NOT_VALID, ExitStatus.NO_SUCCESS
INTERRUPTED, TERMINATED = ExitStatus.INTERRUPTED, ExitStatus.TERMINATED


@dataclass(frozen=True, slots=True)
class RunOutcome:
    """What the exit status depends on, for one run (or one sweep step)."""

    interrupted: bool
    stop_reason: str
    client_valid: bool  # the client kept up (client health)
    sent: int
    ok: int


@dataclass(frozen=True, slots=True)
class ExitDecision:
    code: ExitStatus
    reason: str  # one line for stderr; "" when the code is 0


def run_exit_status(run: RunOutcome, stored: bool = True) -> ExitDecision:
    if run.interrupted:
        return ExitDecision(stopped_status(run.stop_reason), run.stop_reason or "interrupted")
    if run.stop_reason.startswith("aborted"):
        return ExitDecision(ERROR, run.stop_reason)
    if not stored:
        return ExitDecision(BAD_INPUT, "the run could not be stored (its files were written)")
    if not run.ok:
        what = f"all {run.sent} requests failed" if run.sent else "no request was sent"
        return ExitDecision(NO_SUCCESS, f"no request succeeded ({what})")
    if not run.client_valid:
        return ExitDecision(NOT_VALID, "run NOT VALID: the client could not keep up with the load asked")
    return ExitDecision(OK, "")


def sweep_exit_status(steps: Sequence[RunOutcome], interrupted: bool, stop_reason: str) -> ExitDecision:
    """The curve's steps decide: a sweep is interrupted or aborted as a whole; it failed when no step
    had a success; it is not valid when the client could not keep up at some step."""
    if interrupted:
        return ExitDecision(stopped_status(stop_reason), stop_reason or "interrupted")
    if "aborted" in stop_reason:
        return ExitDecision(ERROR, stop_reason)
    if not any(s.ok for s in steps):
        return ExitDecision(NO_SUCCESS, "no request succeeded at any step")
    invalid = [str(i + 1) for i, s in enumerate(steps) if not s.client_valid]
    if invalid:
        return ExitDecision(
            NOT_VALID, f"NOT VALID at step(s) {', '.join(invalid)}: the client could not keep up (left out)"
        )
    return ExitDecision(OK, "")


def with_gate(decision: ExitDecision, gate: FailOnReport | None) -> ExitDecision:
    """A run that measured what was asked, judged by its --fail-on lines: 0 pass, 1 fail, 5 undecided;
    any other status stands (a NOT VALID run's numbers neither pass nor fail a gate)."""
    if gate is None or decision.code is not OK:
        return decision
    code = verdict_code(gate.outcome)
    return ExitDecision(code, "" if code is OK else f"--fail-on {gate.line()}")


def sweep_gate(decision: ExitDecision, steps: Sequence[tuple[int, FailOnReport | None]]) -> ExitDecision:
    """A sweep judged by its --fail-on lines at every step of the curve, naming the steps that fail
    and those undecided; its own status stands where it is not 0."""
    judged = [(i, g) for i, g in steps if g is not None]
    if not judged or decision.code is not OK:
        return decision
    code = worst([verdict_code(g.outcome) for _, g in judged])
    if code is OK:
        return decision
    parts = []
    for state in ("fail", "undecided"):
        at = [(i, g) for i, g in judged if g.outcome == state]
        if at:
            first = at[0][1].decided_by
            name = first.line.name if first else ""
            parts.append(f"{state} at step(s) {', '.join(str(i) for i, _ in at)} (step {at[0][0]}: {name})")
    return ExitDecision(code, "--fail-on " + "; ".join(parts))
