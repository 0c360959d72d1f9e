"""Use case: compare two stored runs (ids, labels or baseline names)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tokenpace.adapters.store import RunInfo, Store
from tokenpace.app.baseline.library_noise import learned_noise, runs_host
from tokenpace.core.analysis.comparison.compare import (
    DEFAULT_ALPHA,
    DEFAULT_PERCENTILES,
    Comparison,
    compare_runs_records,
)
from tokenpace.core.analysis.comparison.conditions import cache_warnings, differing_fields, run_level
from tokenpace.core.analysis.evidence.runnoise import ASSUMED_CENTRE_SD, ASSUMED_TAIL_SD
from tokenpace.core.analysis.evidence.verdict import DEFAULT_MIN_EFFECT


@dataclass(slots=True)
class RunComparison:
    a: RunInfo
    b: RunInfo
    comparison: Comparison
    differing: list[tuple[str, Any, Any]]
    run_level: list[dict[str, Any]]
    warnings: list[str] = field(default_factory=list)
    runs_a: list[str] = field(default_factory=list)  # the side's runs: its repeat group, or the run
    runs_b: list[str] = field(default_factory=list)
    runs_measured: int = 0  # both sides' runs, those left out (NOT VALID) included

    @property
    def runs_left_out(self) -> int:
        return max(0, self.runs_measured - len(self.runs_a) - len(self.runs_b))

    def to_dict(self) -> dict[str, Any]:
        return {
            "a": _side(self.a) | {"runs": self.runs_a},
            "b": _side(self.b) | {"runs": self.runs_b},
            "differing_conditions": [{"field": f, "a": va, "b": vb} for f, va, vb in self.differing],
            "warnings": self.warnings,
            **self.comparison.to_dict(),
            "run_level": self.run_level,
        }


def _side(run: RunInfo) -> dict[str, Any]:
    return {
        "run_id": run.id,
        "started_at": run.started_at,
        "model": run.model,
        "endpoint": run.endpoint,
        "labels": run.labels,
        "records": run.record_count,
    }


def condition_warnings(a: RunInfo, b: RunInfo, differing: list[tuple[str, Any, Any]]) -> list[str]:
    out = []
    if differing:
        shown = ", ".join(f for f, _, _ in differing[:12])
        more = f" and {len(differing) - 12} more" if len(differing) > 12 else ""
        out.append(f"the runs' conditions differ: {shown}{more}")
    out += cache_warnings(a.conditions, b.conditions, a.summary, b.summary)
    for run, side in ((a, "A"), (b, "B")):
        if run.interrupted:
            out.append(f"run {side} ({run.id}) was interrupted: {run.stop_reason}")
        if not run.valid:
            why = "; ".join(run.extra.get("invalid_reasons") or []) or "the client could not keep up"
            out.append(f"run {side} ({run.id}) is marked NOT VALID ({why}): judged only because allowed")
    return out


class RunNotJudgeable(ValueError):
    """A run that is not valid or did not finish: comparing it would judge the client, not the server."""


def not_judgeable_reasons(run: RunInfo) -> list[str]:
    """Why a stored run cannot be judged (empty when it can)."""
    reasons = [] if run.valid else list(run.extra.get("invalid_reasons") or ["marked not valid"])
    if run.interrupted and not any("did not finish" in r for r in reasons):
        reasons.append(f"interrupted ({run.stop_reason})")
    return reasons


def require_judgeable(runs: Sequence[tuple[str, RunInfo]], allow_invalid: bool) -> None:
    if allow_invalid:
        return
    for side, run in runs:
        reasons = not_judgeable_reasons(run)
        if reasons:
            raise RunNotJudgeable(
                f"run {side} ({run.id}) is NOT VALID: {'; '.join(reasons)}. Its numbers measure a run that "
                "did not do what was asked; rerun it, or pass --allow-invalid to judge it anyway"
            )


def judgeable_members(store: Store, ids: list[str]) -> tuple[list[str], list[str]]:
    """A group's members that can be judged, and a note for each left out; a lone run, or a group
    left with none, is returned as it was (and refused by ``require_judgeable``)."""
    if len(ids) < 2:
        return ids, []
    kept, notes = [], []
    for i in ids:
        run = store.get_run(i)
        reasons = not_judgeable_reasons(run) if run is not None else []
        if reasons:
            notes.append(f"run {i} of the group left out: NOT VALID ({'; '.join(reasons)}); the rest decide")
        else:
            kept.append(i)
    return (kept, notes) if kept else (ids, [])


def side_runs(store: Store, run: RunInfo, single: bool) -> tuple[str | None, list[str]]:
    """The runs a side stands for: the repeat group ``run`` belongs to (unless ``single``)."""
    group = None if single else store.repeat_group_of(run.id)
    return (group[0], group[1]) if group else (None, [run.id])


# Labels that name one window both runs were measured in, interleaved: the gateway's session (its
# arms split live traffic) and an A/B test's id (its arms alternate block by block).
SAME_WINDOW_LABELS = ("gateway_session", "ab")


def measured_together(a: RunInfo, b: RunInfo) -> bool:
    """Two arms of one gateway session or one A/B test: what moves one run moves the other."""
    return a.id != b.id and any(
        a.labels.get(k) and a.labels.get(k) == b.labels.get(k) for k in SAME_WINDOW_LABELS
    )


def noise_warning(comparison: Comparison) -> str | None:
    assumed = comparison.assumed_noise
    if not assumed:
        return None
    shown = ", ".join(assumed[:6]) + (" ..." if len(assumed) > 6 else "")
    return (
        f"no other runs of this test in the library for {shown}: the noise between runs is assumed "
        f"({ASSUMED_CENTRE_SD:.0%} of the value up to P50, {ASSUMED_TAIL_SD:.0%} above), so only large "
        "changes are decided; every stored run of the same test (conditions, target and labels "
        "alike) teaches it, or measure both sides with bench --repeat 5"
    )


@dataclass(slots=True)
class Sides:
    """Two resolved sides: the runs each stands for (NOT VALID members of a group left out)."""

    a: RunInfo
    b: RunInfo
    group_a: str | None
    group_b: str | None
    ids_a: list[str]
    ids_b: list[str]
    left_out: list[str]  # a note per member left out
    measured: int  # both sides' runs before any was left out

    @property
    def own_groups(self) -> list[str]:
        return [g for g in (self.group_a, self.group_b) if g]


def resolve_sides(store: Store, ref_a: str, ref_b: str, allow_invalid: bool, single: bool) -> Sides:
    """The runs each side stands for; a run that cannot be judged refused (``RunNotJudgeable``)
    unless ``allow_invalid``."""
    a, b = store.resolve(ref_a), store.resolve(ref_b)
    group_a, ids_a = side_runs(store, a, single)
    group_b, ids_b = side_runs(store, b, single)
    left_out: list[str] = []
    measured = len(ids_a) + len(ids_b)
    if not allow_invalid:  # a NOT VALID member of a group is left out; the rest decide
        ids_a, out_a = judgeable_members(store, ids_a)
        ids_b, out_b = judgeable_members(store, ids_b)
        left_out = out_a + out_b
    members = [("A", store.get_run(i) or a) for i in ids_a or [a.id]]
    members += [("B", store.get_run(i) or b) for i in ids_b or [b.id]]
    require_judgeable(members, allow_invalid)
    return Sides(a, b, group_a, group_b, ids_a, ids_b, left_out, measured)


def finish(sides: Sides, comparison: Comparison) -> RunComparison:
    """The comparison with the sides' conditions, warnings and runs."""
    a, b = sides.a, sides.b
    differing = differing_fields(a.conditions, b.conditions)
    warnings = condition_warnings(a, b, differing)
    if a.id == b.id or (sides.group_a is not None and sides.group_a == sides.group_b):
        warnings.insert(0, f"A and B are the same run{'s' if sides.group_a else ''} ({a.id})")
    warnings += sides.left_out
    if (note := noise_warning(comparison)) is not None:
        warnings.append(note)
    rc = RunComparison(a, b, comparison, differing, run_level(a.summary, b.summary), warnings)
    rc.runs_a, rc.runs_b, rc.runs_measured = sides.ids_a, sides.ids_b, sides.measured
    return rc


def compare_runs(
    store: Store,
    ref_a: str,
    ref_b: str,
    percentiles: Sequence[float] = DEFAULT_PERCENTILES,
    alpha: float = DEFAULT_ALPHA,
    min_effect: float = DEFAULT_MIN_EFFECT,
    resamples: int = 1000,
    seed: int = 0,
    allow_invalid: bool = False,
    single: bool = False,
    one_sided: bool = False,
) -> RunComparison:
    """B against A: positive differences mean B is larger (slower, for latencies). A run of a repeat
    group stands for its whole group (``single``: only itself). A run that is not valid or was
    interrupted is refused (``RunNotJudgeable``) unless ``allow_invalid``."""
    sides = resolve_sides(store, ref_a, ref_b, allow_invalid, single)
    ids = [*sides.ids_a, *sides.ids_b]
    comparison = compare_runs_records(
        [store.load_records(i) for i in sides.ids_a],
        [store.load_records(i) for i in sides.ids_b],
        percentiles=percentiles,
        alpha=alpha,
        min_effect=min_effect,
        resamples=resamples,
        seed=seed,
        learned=learned_noise(store, sides.a, sides.own_groups, ids),
        one_sided=one_sided,
        same_window=measured_together(sides.a, sides.b),
        host=runs_host(store, ids),
    )
    return finish(sides, comparison)
