"""The sweeps pages: stored sweeps (their steps are runs of kind ``sweep`` labelled ``sweep_id``),
and one sweep's curves with its knee, safe watermark, SLO lines and the replicas for a peak
(``?peak=RPS``): the sweep report's analysis (``app/sweep/sweep_capacity.py``) and figures
(``adapters/report/figures.py``) on the steps read back from the store."""

from __future__ import annotations

from typing import Any

from tokenpace.adapters.report import figures as F
from tokenpace.adapters.store import RunInfo, RunQuery, Store
from tokenpace.app.console.page import Ask, BadAsk, Chart, NotFound
from tokenpace.app.console.runs_page import load_text
from tokenpace.app.reports.tables import plan_lines, steps_table
from tokenpace.app.sweep.sweep_capacity import capacity

STEPS_MAX = 500  # steps of one sweep read (a sweep runs tens)
SCAN_MAX = 5000  # newest sweep steps read to list the sweeps
PEAK_MAX = 1e9


def _step_number(run: RunInfo) -> int:
    try:
        return int(run.labels.get("sweep_step", "0"))
    except ValueError:
        return 0


def sweeps_data(store: Store, ask: Ask) -> dict[str, Any]:
    sweeps: dict[str, dict[str, Any]] = {}
    for run in store.list_runs({"kind": "sweep"}, limit=SCAN_MAX):
        sweep_id = run.labels.get("sweep_id")
        if not sweep_id:
            continue
        row = sweeps.setdefault(
            sweep_id,
            {"sweep_id": sweep_id, "started_at": run.started_at, "model": run.model, "steps": 0, "loads": []},
        )
        row["started_at"] = min(row["started_at"], run.started_at)
        row["valid"] = row.get("valid", True) and run.valid
        if run.labels.get("sweep_phase") != "revisit":  # the drift check is off the curve
            row["steps"] += 1
            row["loads"].append((_step_number(run), load_text(run.conditions)))
    rows = sorted(sweeps.values(), key=lambda r: r["started_at"], reverse=True)
    for row in rows:
        row["loads"] = [text for _, text in sorted(row["loads"])]
    return {"sweeps": rows}


def _step_doc(r: RunInfo) -> dict[str, Any]:
    phase = r.labels.get("sweep_phase", "step")
    return {
        "run_id": r.id,
        "conditions": r.conditions,
        "summary": r.summary,
        "valid": r.valid,
        "sweep_step": {"index": _step_number(r), "phase": phase},
    }


def _curve(runs: list[RunInfo]) -> list[dict[str, Any]]:
    """The curve's steps in order (a revisit is off the curve; a step rerun longer at the same load
    replaces the short one), each in the ``bench --out`` shape the analysis reads."""
    by_load: dict[tuple[Any, ...], RunInfo] = {}
    for run in sorted(runs, key=_step_number):
        if run.labels.get("sweep_phase") == "revisit":
            continue
        load = run.conditions.get("load") or {}
        wl = run.conditions.get("workload") or {}
        key = (load.get("mode"), load.get("concurrency"), load.get("rate"), str(wl.get("input_len")))
        by_load[key] = run
    return [_step_doc(r) for r in sorted(by_load.values(), key=_step_number)]


def _peak(ask: Ask) -> float | None:
    raw = ask.text("peak")
    if not raw:
        return None
    try:
        peak = float(raw)
    except ValueError:
        raise BadAsk(f"peak: expected requests/s, got {raw[:40]!r}") from None
    if not 0 < peak <= PEAK_MAX:
        raise BadAsk("peak: a positive request rate")
    return peak


def sweep_data(store: Store, ask: Ask) -> dict[str, Any]:
    sweep_id = ask.path("sweep_id")
    peak = _peak(ask)
    found = store.page_runs(RunQuery(labels={"sweep_id": sweep_id}, kinds=("sweep",), limit=STEPS_MAX))
    if not found.runs:
        raise NotFound(f"no stored sweep {sweep_id!r}")
    steps = _curve(found.runs)
    revisits = [_step_doc(r) for r in found.runs if r.labels.get("sweep_phase") == "revisit"]
    first = steps[0]["conditions"]
    slo = first.get("slo") or {}
    lengths = {str((s["conditions"].get("workload") or {}).get("input_len")) for s in steps}
    doc: dict[str, Any] = {"sweep_id": sweep_id, "steps": steps, "slo": slo, "slo_percentile": "p95"}
    note = None
    if len(lengths) > 1:
        note = "this sweep steps the input length, not the load: no knee or plan"
    else:
        revisit = revisits[-1] if revisits else None
        doc |= capacity(steps, slo or None, "p95", peak_rps=peak, revisit=revisit)
    headers, rows = steps_table(doc, with_ci=True)
    return {
        "sweep_id": sweep_id,
        "model": first.get("model"),
        "endpoint": first.get("endpoint"),
        "started_at": first.get("started_at"),
        "peak_rps": peak,
        "slo": slo,
        "note": note,
        "plan_lines": plan_lines(doc) if note is None else [],
        "steps_table": {"headers": headers, "rows": rows},
        "step_runs": [s["run_id"] for s in steps],
        "analysis": doc.get("analysis"),
        "plan": doc.get("plan"),
        "_doc": doc,
    }


def sweep_charts(data: dict[str, Any]) -> list[Chart]:
    doc = data["_doc"]
    figs = [
        F.latency_curve(doc, "ttft_ms", "TTFT"),
        F.latency_curve(doc, "e2e_ms", "E2E"),
        F.latency_curve(doc, "tpot_ms", "TPOT"),
        F.throughput_curve(doc),
    ]
    return [Chart(str(f.layout.title.text), f) for f in figs]
