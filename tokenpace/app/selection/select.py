"""Use case: judge stored candidates (runs, sweeps, label queries) against a scenario, cost them,
recommend one, and estimate tiered routing. The rules are core's (core/analysis/selection/select.py, cost.py);
this module finds the runs and their records in the store and hands them over. A predicted sweep
file (`sim --virtual --predicted-sweep`) is a candidate too, judged by the same rules, marked
predicted and never the recommendation (app/selection/select_predicted.py,
core/analysis/selection/predicted.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from tokenpace.adapters.results import read_result
from tokenpace.adapters.scenario_files import load_book
from tokenpace.adapters.store import RunInfo, Store, StoreError
from tokenpace.adapters.store.query import parse_where
from tokenpace.app.selection.select_predicted import predicted_points, read_predicted
from tokenpace.core.analysis.capacity.drift import trend_dict
from tokenpace.core.analysis.selection.cost import (
    Cost,
    Recommendation,
    TierEstimate,
    cost_of,
    count_meeting,
    metric_samples,
    recommend,
    tiered,
)
from tokenpace.core.analysis.selection.predicted import PREDICTED_NOTE, as_predicted, predicted_label
from tokenpace.core.analysis.selection.prefill_fit import fit_records, move_to_input_len
from tokenpace.core.analysis.selection.scenarios import (
    Prices,
    Scenario,
    ScenarioBook,
    ScenarioError,
    check_prices,
)
from tokenpace.core.analysis.selection.select import Placement, RunPoint, Verdict, judge, run_point
from tokenpace.core.analysis.selection.settled import halves
from tokenpace.core.exit_codes import ExitStatus


def load_scenarios(path: Path | None = None) -> ScenarioBook:
    return load_book(path)


def write_select_html(path: Path, docs: list[dict[str, Any]]) -> None:
    """The selection report (one section per scenario) as one offline HTML file."""
    from tokenpace.adapters.report.select_html import render_select_html  # plotly: only when asked

    path.write_text(render_select_html(docs), encoding="utf-8")


@dataclass
class Candidate:
    name: str  # as the user typed it
    kind: str  # run | sweep | predicted
    runs: list[RunInfo]
    predicted: dict[str, Any] | None = None  # a predicted sweep document (kind "predicted")

    @property
    def model(self) -> str | None:
        return self.runs[0].model if self.runs else None


def _sweep_curve(runs: list[RunInfo]) -> list[RunInfo]:
    """A sweep's curve steps: an --auto sweep's closed-loop probe steps and the step revisited at the
    end (a drift check) are not on its curve. An input-length sweep steps the prompt, not the load:
    it is a fit (--input-fit), not a candidate."""
    runs = [r for r in runs if r.labels.get("sweep_phase") != "revisit"]
    lengths = {str(((r.conditions.get("workload") or {}).get("input_len") or {}).get("spec")) for r in runs}
    if len(lengths) > 1:
        sweep_id = runs[0].labels.get("sweep_id", "")
        raise ScenarioError(
            f"sweep {sweep_id} steps the input length, not the load: "
            f"give it as --input-fit CANDIDATE={sweep_id}"
        )
    modes = {(r.conditions.get("load") or {}).get("mode") for r in runs}
    if len(modes) > 1:
        return [r for r in runs if (r.conditions.get("load") or {}).get("mode") == "open_loop"]
    return runs


def _stored_id(ref: str) -> str:
    """A sweep or result file stands for the sweep or run it saved in the store."""
    if not ref.endswith(".json") or not Path(ref).is_file():
        return ref
    try:
        doc = read_result(Path(ref))
        return str(doc.get("sweep_id") or doc["run_id"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ScenarioError(f"{ref}: not a tokenpace sweep or result file ({exc})") from None


def needs_store(candidates: list[str], wheres: list[str]) -> bool:
    """Whether a selection reads the store: not when every candidate is a predicted sweep file."""
    return bool(wheres) or any(read_predicted(ref) is None for ref in candidates)


def _need(store: Store | None) -> Store:
    if store is None:
        raise StoreError("stored candidates need the store (--store URL)")
    return store


def resolve_candidate(store: Store | None, ref: str) -> Candidate:
    """A sweep id or sweep file (its stored steps), else a run reference (id, prefix, baseline,
    key=value) or result file; a predicted sweep file is a predicted candidate."""
    predicted = read_predicted(ref)
    if predicted is not None:
        return Candidate(ref, "predicted", [], predicted)
    stored, runs = _stored_id(ref), _need(store)
    steps = runs.list_runs(where={"sweep_id": stored}, newest_first=False, full=True)
    if steps:
        return Candidate(ref, "sweep", _sweep_curve(steps))
    return Candidate(ref, "run", [runs.resolve(stored)])


def resolve_query(store: Store, query: str) -> Candidate:
    """``--where K=V[,K=V]``: the newest matching run, or the whole sweep it belongs to."""
    hits = store.list_runs(where=parse_where([p for p in query.split(",") if p.strip()]), limit=1)
    if not hits:
        raise StoreError(f"no stored run matches --where {query}")
    sweep_id = hits[0].labels.get("sweep_id")
    if sweep_id:
        return Candidate(
            query,
            "sweep",
            _sweep_curve(store.list_runs(where={"sweep_id": sweep_id}, newest_first=False, full=True)),
        )
    run = store.get_run(hits[0].id)
    assert run is not None
    return Candidate(query, "run", [run])


@dataclass
class SelectConfig:
    scenario: str
    candidates: list[str] = field(default_factory=list)
    wheres: list[str] = field(default_factory=list)
    scenarios_file: Path | None = None
    prices: dict[str, Prices] = field(default_factory=dict)  # from flags: win over the file's
    input_fits: dict[str, str] = field(default_factory=dict)  # candidate -> its input-length sweep
    route_small: str | None = None  # candidate taking the simple requests
    route_share: float = 0.5


@dataclass
class SelectReport:
    scenario: Scenario
    verdicts: list[Verdict]
    costs: dict[str, Cost | str]
    recommendation: Recommendation  # among measured candidates only
    tier: TierEstimate | str | None
    predicted: dict[str, str] = field(default_factory=dict)  # predicted candidate -> what predicted it
    predicted_pick: Recommendation | None = None  # a predicted candidate the rules would pick
    predicted_note: ClassVar[str] = PREDICTED_NOTE

    @property
    def exit_code(self) -> ExitStatus:
        """0 when a measured candidate passes (the recommendation), 1 when every measured candidate
        fails, 5 when none passes but some is undecided (or none was measured: a prediction alone
        never passes)."""
        if self.recommendation.candidate is not None:
            return ExitStatus.OK
        measured = [v for v in self.verdicts if v.kind != "predicted"]
        if measured and all(v.status == "fail" for v in measured):
            return ExitStatus.ABORTED
        return ExitStatus.UNDECIDED

    def outcome_line(self) -> str:
        """One line: the scenario's outcome and what decided it."""
        name, rec = self.scenario.name, self.recommendation
        if rec.candidate is not None:
            return f"{name}: PASS: {rec.candidate} passes every line"
        measured = [v for v in self.verdicts if v.kind != "predicted"]
        if self.exit_code is ExitStatus.ABORTED:
            names = ", ".join(v.candidate for v in measured)
            return f"{name}: FAIL: every measured candidate fails ({names})"
        open_ = [v.candidate for v in measured if v.status != "fail"]
        why = f"undecided: {', '.join(open_)}" if open_ else "no measured candidate"
        return f"{name}: UNDECIDED: no candidate passes ({why})"

    def _candidate(self, v: Verdict) -> dict[str, Any]:
        cost = _cost_dict(self.costs.get(v.candidate))
        return {**v.to_dict(), "predicted": self.predicted.get(v.candidate), "cost": cost}

    def to_dict(self) -> dict[str, Any]:
        pick = self.predicted_pick
        return {
            "scenario": self.scenario.to_dict(),
            "candidates": [self._candidate(v) for v in self.verdicts],
            "recommendation": {**self.recommendation.to_dict(), "basis": "measured"},
            "exit_code": int(self.exit_code),
            "outcome_line": self.outcome_line(),
            "predicted_recommendation": (
                {**pick.to_dict(), "basis": "PREDICTED", "note": PREDICTED_NOTE} if pick else None
            ),
            "tiered": self.tier.to_dict() if isinstance(self.tier, TierEstimate) else self.tier,
        }


def _cost_dict(c: Cost | str | None) -> dict[str, Any] | None:
    if c is None:
        return None
    return c.to_dict() if isinstance(c, Cost) else {"none": c}


def _points(store: Store | None, cand: Candidate, scenario: Scenario) -> list[RunPoint]:
    if cand.predicted is not None:
        return predicted_points(cand.name, cand.predicted, scenario)
    out = []
    for run in cand.runs:
        open_loop = (run.conditions.get("load") or {}).get("mode") == "open_loop"
        records = _need(store).load_records(run.id)
        good = count_meeting(records, scenario, from_scheduled=open_loop)
        result = {"conditions": run.conditions, "summary": run.summary, "valid": run.valid,
                  "interrupted": run.interrupted,
                  "time_trend": trend_dict(records, open_loop) if records else None,
                  "halves": halves(records, open_loop)}  # fmt: skip
        out.append(run_point(run.id, result, good))
    return out


def _input_fit(store: Store, ref: str, scenario: Scenario) -> Callable[[Placement], Placement]:
    """The prefill fit of a stored input-length sweep (its id, or its sweep file), as a move to the
    scenario's input length."""
    sweep_id = _stored_id(ref)
    steps = store.list_runs(where={"sweep_id": sweep_id}, newest_first=False)
    if not steps:
        raise StoreError(f"--input-fit: no stored sweep {sweep_id!r}")
    records = [r for run in steps for r in store.load_records(run.id)]
    try:
        fit = fit_records(records)
    except ValueError as exc:
        raise ScenarioError(f"--input-fit {sweep_id}: {exc}") from None
    return lambda at: move_to_input_len(at, fit, scenario.input_len, f"sweep {sweep_id}")


def _price_for(cand: Candidate, flags: dict[str, Prices], book: ScenarioBook) -> Prices | None:
    for name in (cand.name, cand.model):
        for table in (flags, book.prices):
            if name and name in table:
                return table[name]
    return None


def run_select(store: Store | None, config: SelectConfig) -> SelectReport:
    """``store`` may be None when every candidate is a predicted sweep file (see ``needs_store``)."""
    book = load_scenarios(config.scenarios_file)
    scenario = book.scenarios.get(config.scenario)
    if scenario is None:
        raise ScenarioError(f"no scenario {config.scenario!r} (known: {', '.join(sorted(book.scenarios))})")
    for name, flag_prices in config.prices.items():
        check_prices(flag_prices, f"price of {name!r}")
    cands = [resolve_candidate(store, r) for r in config.candidates]
    cands += [resolve_query(_need(store), q) for q in config.wheres]
    if not cands:
        raise ScenarioError("give at least one candidate: a run, a sweep id or --where K=V")
    if len({c.name for c in cands}) < len(cands):
        raise ScenarioError("a candidate is named twice")
    verdicts: list[Verdict] = []
    costs: dict[str, Cost | str] = {}
    unknown = set(config.input_fits) - {c.name for c in cands}
    if unknown:
        raise ScenarioError(f"--input-fit names no candidate: {', '.join(sorted(unknown))}")
    for cand in cands:
        adjust = (
            _input_fit(_need(store), config.input_fits[cand.name], scenario)
            if cand.name in config.input_fits
            else None
        )
        points = _points(store, cand, scenario)
        verdict = judge(scenario, cand.name, points, cand.kind != "run", adjust)
        if cand.predicted is not None:
            told = cand.predicted.get("predicted") or {}
            verdict = as_predicted(verdict, told.get("caveats") or (), told.get("pass_unproven") or ())
        verdicts.append(verdict)
        prices = _price_for(cand, config.prices, book)
        if prices is not None:
            costs[cand.name] = cost_of(prices, verdict)
    rec, pick = _recommendations(verdicts, costs)
    tier = _tier(store, scenario, config, verdicts, costs, rec) if config.route_small else None
    labels = {c.name: predicted_label(c.predicted["predicted"]) for c in cands if c.predicted is not None}
    return SelectReport(scenario, verdicts, costs, rec, tier, labels, pick)


def _recommendations(
    verdicts: list[Verdict], costs: dict[str, Cost | str]
) -> tuple[Recommendation, Recommendation | None]:
    """The recommendation among measured candidates, and the predicted candidate the same rules
    would pick over it (None when they would pick a measured one, or none)."""
    measured = [v for v in verdicts if v.kind != "predicted"]
    rec = recommend(measured, costs)
    if not measured:
        rec = Recommendation(None, "no measured candidate: a predicted one cannot be recommended", None)
    over_all = recommend(verdicts, costs)
    predicted = {v.candidate for v in verdicts if v.kind == "predicted"}
    pick = over_all if over_all.candidate in predicted else None
    return rec, pick


def _tier(
    store: Store | None,
    scenario: Scenario,
    config: SelectConfig,
    verdicts: list[Verdict],
    costs: dict[str, Cost | str],
    rec: Recommendation,
) -> TierEstimate | str:
    if not 0 < config.route_share < 1:
        raise ScenarioError("--route-share must be between 0 and 1 (the share sent to the small candidate)")
    by_name = {v.candidate: v for v in verdicts}
    small = by_name.get(config.route_small or "")
    if small is None:
        raise ScenarioError(f"--route-small {config.route_small!r} is not one of the candidates")
    if small.kind == "predicted":
        raise ScenarioError(
            f"--route-small {config.route_small!r} is predicted: routing blends measured requests"
        )
    others = sorted(
        (v for v in verdicts if v.status == "pass" and v is not small and v.kind != "predicted"),
        key=lambda v: (v.candidate != rec.candidate, -(v.margin or 0.0)),
    )
    if not others:
        return "no passing candidate besides the small one to take the rest"
    large = others[0]
    if not small.placement.trusted:
        return f"the small candidate has no numbers at the scenario's load ({small.placement.where})"

    def samples(v: Verdict) -> dict[str, list[float]]:
        run_id = v.placement.runs[-1]  # the higher-load run: conservative
        run = _need(store).get_run(run_id)
        open_loop = run is not None and (run.conditions.get("load") or {}).get("mode") == "open_loop"
        return metric_samples(_need(store).load_records(run_id), from_scheduled=open_loop)

    return tiered(
        scenario,
        config.route_share,
        (small, samples(small), costs.get(small.candidate)),
        (large, samples(large), costs.get(large.candidate)),
    )
