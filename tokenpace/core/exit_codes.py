"""The one table of exit codes every command ends with (docs/exit-codes.md shows it). Pure.

A gate, a check, a validation or a rollout verdict decides 0 (pass), 1 (fail) or UNDECIDED (the
interval holds the line: more data would decide); bad input is 2, as click's usage errors are, so a
pipeline tells a typo from "needs more runs". A run that did not measure what was asked has codes of
its own (3, 4, 130, 143), and they come before any gate: its numbers cannot pass or fail one.
"""

from __future__ import annotations

from enum import IntEnum


class ExitStatus(IntEnum):
    OK = 0  # measured what was asked; every gate passed
    ABORTED = 1  # failed: a gate's interval wholly beyond its line, a regression, or an aborted run
    REFUSED = 2  # bad input (usage, flags, files, store), or a run that could not be stored
    NOT_VALID = 3  # the client could not keep up with the load asked (app/run/exit_status.py)
    NO_SUCCESS = 4  # no request succeeded: every one failed, or none was sent
    UNDECIDED = 5  # an interval straddles its line, or too few samples to form it
    INTERRUPTED = 130  # Ctrl-C (128 + SIGINT): what was measured is kept
    TERMINATED = 143  # SIGTERM (128 + SIGTERM), e.g. a CI job's timeout or `kill`: kept too


# The names a verdict goes by, one code each: a gate (pass, fail), check (regressed), sim calibrate
# --validate (holds, fails), arms (promote, roll back, hold), select (a recommendation, none).
FAILED = ExitStatus.ABORTED
VERDICT_CODES: dict[str, ExitStatus] = {
    "pass": ExitStatus.OK,
    "holds": ExitStatus.OK,
    "promote": ExitStatus.OK,
    "fail": FAILED,
    "fails": FAILED,
    "regressed": FAILED,
    "roll back": FAILED,
    "undecided": ExitStatus.UNDECIDED,
    "hold": ExitStatus.UNDECIDED,
}


def verdict_code(verdict: str) -> ExitStatus:
    """The exit code of a verdict named as above; an unknown name is undecided (never a pass)."""
    return VERDICT_CODES.get(verdict, ExitStatus.UNDECIDED)


def worst(codes: list[ExitStatus]) -> ExitStatus:
    """Several verdicts as one exit code: any fail fails, else any undecided, else pass."""
    if FAILED in codes:
        return FAILED
    if ExitStatus.UNDECIDED in codes:
        return ExitStatus.UNDECIDED
    return ExitStatus.OK
