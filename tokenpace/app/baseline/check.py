"""Use case: the release gate — a run against a named baseline, with regression thresholds."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tokenpace.adapters.store import Store, StoreError
from tokenpace.app.baseline.compare import RunComparison, compare_runs
from tokenpace.core.analysis.comparison.compare import DEFAULT_ALPHA
from tokenpace.core.analysis.comparison.conditions import gate_mismatches, get_path
from tokenpace.core.analysis.comparison.gate import GateItem, LeftOut, Threshold, evaluate
from tokenpace.core.exit_codes import ExitStatus

PASS, REGRESSED, UNDECIDED = ExitStatus.OK, ExitStatus.ABORTED, ExitStatus.UNDECIDED
BASELINE_RERUN_LABEL = "baseline_rerun"  # a baseline's build measured again (check --until-decided)


@dataclass(slots=True)
class CheckReport:
    baseline: str
    run: RunComparison
    thresholds: list[Threshold]
    items: list[GateItem]

    @property
    def exit_code(self) -> ExitStatus:
        if any(i.outcome == "regressed" for i in self.items):
            return REGRESSED
        if any(i.outcome == "undecided" for i in self.items):
            return UNDECIDED
        return PASS

    @property
    def outcome(self) -> str:
        return {PASS: "pass", REGRESSED: "regressed", UNDECIDED: "undecided"}[self.exit_code]

    def to_dict(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome,
            "exit_code": int(self.exit_code),
            "baseline": {"name": self.baseline, "run_id": self.run.a.id},
            "candidate": {"run_id": self.run.b.id, "labels": self.run.b.labels},
            "checks": [i.to_dict() for i in self.items],
            "decision_rule": self.run.comparison.rule,
            "warnings": self.run.warnings,
            "comparison": self.run.to_dict(),
        }


class ConditionsDiffer(ValueError):
    """The candidate was measured as a different test (load, lengths, API...): judging it against
    the baseline would call the change of test a regression."""


def check(
    store: Store,
    baseline: str,
    thresholds: Sequence[Threshold],
    candidate: str | None = None,
    alpha: float = DEFAULT_ALPHA,
    resamples: int = 1000,
    seed: int = 0,
    allow_invalid: bool = False,
    allow_other_conditions: bool = False,
) -> CheckReport:
    """Compare ``candidate`` (default: the newest run measured under the baseline's conditions)
    with the baseline; a baseline or candidate that is not valid or was interrupted is refused
    unless ``allow_invalid``, and a candidate measured under other conditions (load, lengths) is
    refused (``ConditionsDiffer``) unless ``allow_other_conditions``."""
    base = store.get_baseline(baseline)
    if base is None:
        names = ", ".join(b.name for b in store.baselines()) or "none yet"
        raise StoreError(
            f"no baseline named {baseline!r} (baselines: {names}); set one: tokenpace baseline set"
        )
    if candidate is None:
        candidate = newest_matching_run(store, base.run_id)
    elif not allow_other_conditions:
        refuse_other_conditions(store, base.run_id, candidate, baseline)
    percentiles = sorted({t.q for t in thresholds} | {50.0})
    min_effect = min(t.limit for t in thresholds)
    rc = compare_runs(
        store, base.run_id, candidate, percentiles, alpha, min_effect, resamples, seed, allow_invalid,
        one_sided=True,
    )  # fmt: skip
    if allow_other_conditions and (differ := gate_mismatches(rc.a.conditions, rc.b.conditions)):
        rc.warnings.insert(0, f"judged although measured under other conditions: {', '.join(differ)}")
    lost = LeftOut(rc.runs_measured, rc.runs_left_out)  # the advice plans for runs lost the same way
    return CheckReport(baseline, rc, list(thresholds), evaluate(rc.comparison, thresholds, lost))


def refuse_other_conditions(store: Store, baseline_run: str, candidate: str, name: str) -> None:
    base, cand = store.get_run(baseline_run), store.resolve(candidate)
    if base is None:
        return
    differ = gate_mismatches(base.conditions, cand.conditions)
    if differ:
        shown = "; ".join(_difference(f, base.conditions, cand.conditions) for f in differ[:4])
        raise ConditionsDiffer(
            f"run {cand.id} was measured as a different test from baseline {name} ({shown}): its "
            "change would be the test's, not the server's. Measure it like the baseline, or pass "
            "--allow-other-conditions to judge it anyway"
        )


def _difference(field: str, base: dict[str, Any], cand: dict[str, Any]) -> str:
    return f"{field} {get_path(cand, field)!r} vs the baseline's {get_path(base, field)!r}"


def newest_matching_run(store: Store, baseline_run_id: str, scan: int = 500) -> str:
    """The newest stored run measured like the baseline (model, API, load, workload, sampling):
    on a shared store the newest run may be someone else's different test; a baseline's build
    measured again is never a candidate."""
    base = store.get_run(baseline_run_id)
    group = store.repeat_group_of(baseline_run_id)
    own = set(group[1]) if group else {baseline_run_id}  # the baseline's repeat group is the baseline
    others = [
        r for r in store.list_runs(limit=scan) if r.id not in own and BASELINE_RERUN_LABEL not in r.labels
    ]
    if not others:
        raise StoreError("no run to check: the store holds only the baseline's run")
    if base is None:
        return others[0].id
    for run in others:
        if not gate_mismatches(base.conditions, run.conditions):
            return run.id
    differ = ", ".join(gate_mismatches(base.conditions, others[0].conditions)[:4])
    raise StoreError(
        f"no stored run was measured under the baseline's conditions (the newest, {others[0].id}, "
        f"differs in {differ}); name the run to check with --run"
    )
