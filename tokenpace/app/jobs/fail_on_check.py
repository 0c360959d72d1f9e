"""Use case: `check --fail-on`: a stored run judged on absolute lines (its own intervals), alone or
beside the release gate against a baseline; one exit code for both (core/exit_codes.py: any fail
fails, else any undecided is undecided)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tokenpace.adapters.store import RunInfo, Store, StoreError
from tokenpace.app.baseline.check import CheckReport, newest_matching_run
from tokenpace.app.baseline.compare import RunNotJudgeable, not_judgeable_reasons
from tokenpace.core.analysis.comparison.fail_on import FailOnLine
from tokenpace.core.analysis.comparison.fail_on_judge import FailOnReport, judge_fail_on
from tokenpace.core.exit_codes import ExitStatus, verdict_code, worst


@dataclass(slots=True)
class GatedCheck:
    run_id: str
    gate: FailOnReport | None  # None: no --fail-on
    check: CheckReport | None  # None: no --max-regression

    @property
    def exit_code(self) -> ExitStatus:
        codes = [verdict_code(self.gate.outcome)] if self.gate is not None else []
        if self.check is not None:
            codes.append(self.check.exit_code)
        return worst(codes)

    @property
    def outcome(self) -> str:
        """The relative gate's word alone (pass, regressed, undecided); with --fail-on, pass, fail or
        undecided for both."""
        if self.gate is None and self.check is not None:
            return self.check.outcome
        return {ExitStatus.OK: "pass", ExitStatus.ABORTED: "fail"}.get(self.exit_code, "undecided")

    def to_dict(self) -> dict[str, Any]:
        out = self.check.to_dict() if self.check is not None else {"candidate": {"run_id": self.run_id}}
        return out | {
            "outcome": self.outcome,
            "exit_code": int(self.exit_code),
            **({"fail_on": self.gate.to_dict()} if self.gate is not None else {}),
        }


def stored_run(store: Store, run_ref: str | None, baseline: str | None) -> RunInfo:
    """The run a --fail-on check judges: the one named, else the newest measured like the baseline,
    else the newest stored run."""
    if run_ref:
        return store.resolve(run_ref)
    if baseline:
        base = store.get_baseline(baseline)
        if base is None:
            raise StoreError(f"no baseline named {baseline!r}; set one: tokenpace baseline set")
        return store.resolve(newest_matching_run(store, base.run_id))
    newest = store.list_runs(limit=1)
    if not newest:
        raise StoreError("no stored run to check: run tokenpace bench first")
    return store.resolve(newest[0].id)  # with its summary (a listing leaves it out)


def judge_stored(run: RunInfo, lines: Sequence[FailOnLine], allow_invalid: bool) -> FailOnReport:
    """The run's stored summary judged on the lines; a run NOT VALID or interrupted is refused
    (``RunNotJudgeable``) unless ``allow_invalid``: its numbers measure the client, not the server."""
    reasons = not_judgeable_reasons(run)
    if reasons and not allow_invalid:
        raise RunNotJudgeable(
            f"run {run.id} is NOT VALID: {'; '.join(reasons)}; rerun it, or pass --allow-invalid to judge it"
        )
    return judge_fail_on(lines, run.summary)
