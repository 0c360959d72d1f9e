"""How a bench run or a sweep ends, as an exit code: one decision, made here, that the commands use.

| code | meaning |
|---|---|
| 0 | the run measured what was asked |
| 1 | error: the run aborted (50 connect errors in a row, the client failed, a record could not be saved) |
| 2 | bad input (flags, URL, files), or the result could not be stored |
| 3 | NOT VALID: the client could not keep up with the load asked (a sweep: at some step) |
| 4 | no request succeeded (every request failed, or none was sent) |
| 130 / 143 | interrupted (SIGINT / SIGTERM); what was measured is kept, marked not valid |

When several apply, the first in this order wins: interrupted, error, bad input, no success, not valid.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

OK, ERROR, BAD_INPUT, NOT_VALID, NO_SUCCESS = 0, 1, 2, 3, 4
INTERRUPTED, TERMINATED = 130, 143


@dataclass(frozen=True, slots=True)
class RunOutcome:
    """What the exit code depends on, for one run (or one sweep step)."""

    interrupted: bool
    stop_reason: str
    client_valid: bool  # the client kept up (client health)
    sent: int
    ok: int


@dataclass(frozen=True, slots=True)
class ExitStatus:
    code: int
    reason: str  # one line for stderr; "" when the code is 0


def interrupt_reason(signal_name: str) -> str:
    """The stop reason a signal gives a run (the exit code is read back from it)."""
    return f"interrupted by {signal_name}"


def _interrupted(stop_reason: str) -> ExitStatus:
    code = TERMINATED if "SIGTERM" in stop_reason else INTERRUPTED
    return ExitStatus(code, stop_reason or "interrupted")


def run_exit_status(run: RunOutcome, stored: bool = True) -> ExitStatus:
    if run.interrupted:
        return _interrupted(run.stop_reason)
    if run.stop_reason.startswith("aborted"):
        return ExitStatus(ERROR, run.stop_reason)
    if not stored:
        return ExitStatus(BAD_INPUT, "the run could not be stored (its files were written)")
    if not run.ok:
        what = f"all {run.sent} requests failed" if run.sent else "no request was sent"
        return ExitStatus(NO_SUCCESS, f"no request succeeded ({what})")
    if not run.client_valid:
        return ExitStatus(NOT_VALID, "run NOT VALID: the client could not keep up with the load asked")
    return ExitStatus(OK, "")


def sweep_exit_status(
    steps: Sequence[RunOutcome], interrupted: bool, stop_reason: str, stored: bool = True
) -> ExitStatus:
    """The curve's steps decide: a sweep is interrupted or aborted as a whole; it failed when no step
    had a success; it is not valid when the client could not keep up at some step."""
    if interrupted:
        return _interrupted(stop_reason)
    if "aborted" in stop_reason:
        return ExitStatus(ERROR, stop_reason)
    if not stored:
        return ExitStatus(BAD_INPUT, "a step could not be stored (the sweep file was written)")
    if not any(s.ok for s in steps):
        return ExitStatus(NO_SUCCESS, "no request succeeded at any step")
    invalid = [str(i + 1) for i, s in enumerate(steps) if not s.client_valid]
    if invalid:
        return ExitStatus(
            NOT_VALID, f"NOT VALID at step(s) {', '.join(invalid)}: the client could not keep up (left out)"
        )
    return ExitStatus(OK, "")
