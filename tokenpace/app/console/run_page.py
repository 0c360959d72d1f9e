"""One run's page: what its HTML report shows (headline tables with intervals, conditions,
breakdowns, distributions and timelines), from the report's own tables and figures. The charts
draw at most ``RECORDS_MAX`` of its records, evenly spaced (the tables are the stored summary's)."""

from __future__ import annotations

from typing import Any

from tokenpace.adapters.report import figures as F
from tokenpace.adapters.report.breakdowns import breakdowns
from tokenpace.adapters.report.tables import (
    INTERVAL_NOTE,
    Table,
    conditions_table,
    latency_table,
    throughput_table,
)
from tokenpace.adapters.store import RunInfo, Store
from tokenpace.app.console.page import Ask, Chart, NotFound
from tokenpace.core.analysis.comparison.conditions import flatten
from tokenpace.core.metrics import e2e_ns, tpot_ns, ttft_ns
from tokenpace.core.record import RequestRecord, Status

RECORDS_MAX = 5_000  # records a run's charts draw
METRICS = (("ttft_ms", ttft_ns), ("tpot_ms", tpot_ns), ("e2e_ms", e2e_ns))
STEP_KEY = "_step"  # the run and its sampled records, for the charts only (not in the JSON twin)


def table_dict(table: Table) -> dict[str, Any]:
    headers, rows = table
    return {"headers": list(headers), "rows": [[_cell(v) for v in row] for row in rows]}


def _cell(value: Any) -> Any:
    return value if isinstance(value, (int, float, str)) or value is None else str(value)


def samples(records: list[RequestRecord]) -> dict[str, list[float]]:
    """Each metric of the measured, successful records, in ms, in finishing order."""
    out: dict[str, list[float]] = {key: [] for key, _ in METRICS}
    for r in records:
        if r.warmup or r.status is not Status.OK:
            continue
        for key, fn in METRICS:
            v = fn(r)
            if v is not None:
                out[key].append(v / 1e6)
    return out


def run_doc(run: RunInfo) -> dict[str, Any]:
    """The stored run as the report reads a result."""
    return {
        "run_id": run.id,
        "conditions": run.conditions,
        "summary": run.summary,
        "valid": run.valid,
        "invalid_reasons": list(run.extra.get("invalid_reasons") or []),
    }


def conditions_of(run: RunInfo) -> dict[str, Any]:
    doc = run_doc(run)
    try:
        return table_dict(conditions_table(doc))
    except (KeyError, TypeError, AttributeError):  # a gateway session's conditions have no load
        flat = flatten(run.conditions)
        return {"headers": ["condition", "value"], "rows": [[k, _cell(v)] for k, v in sorted(flat.items())]}


def find_run(store: Store, ref: str) -> RunInfo:
    run = store.get_run(ref) if ref else None
    if run is None:
        raise NotFound(f"no stored run {ref[:200]!r}")
    return run


def run_data(store: Store, ask: Ask) -> dict[str, Any]:
    run = find_run(store, ask.path("run_id"))
    records = store.sample_records(run.id, RECORDS_MAX)
    group = store.repeat_group_of(run.id)
    summary = run.summary
    return {
        "run": {
            "id": run.id,
            "kind": run.kind,
            "started_at": run.started_at,
            "model": run.model,
            "endpoint": run.endpoint,
            "labels": run.labels,
            "valid": run.valid,
            "invalid_reasons": list(run.extra.get("invalid_reasons") or []),
            "interrupted": run.interrupted,
            "stop_reason": run.stop_reason,
            "records": run.record_count,
            "repeat_group": {"id": group[0], "runs": group[1]} if group else None,
        },
        "latency": table_dict(latency_table(summary, with_ci=True)) if summary.get("ttft_ms") else None,
        "throughput": table_dict(throughput_table(summary)),
        "conditions": conditions_of(run),
        "breakdowns": [{"title": b.title, **table_dict(b.table())} for b in breakdowns(summary)],
        "interval_note": INTERVAL_NOTE,
        "charted_records": len(records),
        "samples": samples(records),
        STEP_KEY: F.Step(run.id, run_doc(run), records),
    }


def run_charts(data: dict[str, Any]) -> list[Chart]:
    steps: list[F.Step] = [data[STEP_KEY]]
    figures = [  # the report's, in its order (adapters/report/html.py)
        F.cdf(steps, "ttft", "TTFT"),
        F.histogram(steps, "ttft", "TTFT"),
        F.cdf(steps, "tpot", "TPOT"),
        F.histogram(steps, "tpot", "TPOT"),
        F.cdf(steps, "e2e", "E2E"),
        F.histogram(steps, "e2e", "E2E"),
        F.ttft_timeline(steps),
        F.prefill_scatter(steps),
        F.errors_over_time(steps),
    ]
    if (leading := F.leading_indicators(steps[0])) is not None:
        figures.insert(7, leading)
    return [Chart(str(f.layout.title.text), f) for f in figures]
