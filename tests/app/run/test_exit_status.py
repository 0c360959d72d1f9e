"""A run's exit status, then its --fail-on gate: the gate decides only a run that measured what was
asked (0 pass, 1 fail, 5 undecided); a sweep names the steps that fail and those undecided."""

from __future__ import annotations

from typing import Any

from tokenpace.app.run.exit_status import ExitDecision, sweep_gate, with_gate
from tokenpace.app.run.outputs import ExitStatus
from tokenpace.app.run.terms import parse_fail_on
from tokenpace.core.analysis.comparison.fail_on_judge import FailOnReport, judge_fail_on

OK = ExitDecision(ExitStatus.OK, "")


def _gate(p50: float, ci: tuple[float, float]) -> FailOnReport:
    dist: dict[str, Any] = {"n": 200, "p50": p50, "ci95": {"p50": list(ci)}, "n_eff": {}}
    return judge_fail_on(parse_fail_on("e2e.p50<100ms"), {"e2e_ms": dist})


PASSES, FAILS, STRADDLES = _gate(80, (78, 82)), _gate(120, (118, 122)), _gate(99, (97, 101))


def test_the_gate_decides_a_run_that_measured_what_was_asked() -> None:
    assert with_gate(OK, None) is OK and with_gate(OK, PASSES).code is ExitStatus.OK
    failed = with_gate(OK, FAILS)
    assert failed.code == 1 and failed.reason.startswith("--fail-on FAIL: e2e.p50")
    assert with_gate(OK, STRADDLES).code == 5


def test_a_run_that_did_not_measure_what_was_asked_keeps_its_own_code() -> None:
    not_valid = ExitDecision(ExitStatus.NOT_VALID, "run NOT VALID")
    assert with_gate(not_valid, PASSES) is not_valid and with_gate(not_valid, FAILS) is not_valid


def test_a_sweep_fails_when_a_step_fails_and_names_the_steps() -> None:
    done = sweep_gate(OK, [(1, PASSES), (2, STRADDLES), (3, FAILS), (4, FAILS)])
    assert done.code == 1
    assert done.reason == (
        "--fail-on fail at step(s) 3, 4 (step 3: e2e.p50); undecided at step(s) 2 (step 2: e2e.p50)"
    )
    assert sweep_gate(OK, [(1, PASSES), (2, STRADDLES)]).code == 5
    assert sweep_gate(OK, [(1, PASSES), (2, PASSES)]) is OK
    assert sweep_gate(OK, [(1, None)]) is OK  # no --fail-on
    aborted = ExitDecision(ExitStatus.ABORTED, "aborted")
    assert sweep_gate(aborted, [(1, PASSES)]) is aborted
