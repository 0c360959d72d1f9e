"""Compare: two runs, or two repeat groups (a run of a group stands for it unless ``single=1``), by
``app/baseline``'s compare (the same statistics as ``tokenpace compare``): overlaid CDFs, each
percentile's difference with its interval, the verdicts, and every condition that differs.

By default from the figures stored with each run (``stored_compare``: no record read but the
charts' samples); ``exact=1``, or a run without stored figures, runs ``tokenpace compare``'s
bootstrap over the records, where a side of more than ``RECORDS_MAX`` records is refused. The page
says which it used (``method_used``, ``method``)."""

from __future__ import annotations

from functools import partial
from typing import Any

import plotly.graph_objects as go

from tokenpace.adapters.report import figures as F
from tokenpace.adapters.store import RunInfo, Store, StoreError
from tokenpace.app.baseline.compare import RunComparison, RunNotJudgeable, compare_runs, side_runs
from tokenpace.app.baseline.stored_compare import compare_stored
from tokenpace.app.console.page import Ask, BadAsk, Chart, NotFound

RECORDS_MAX = 200_000  # records of one side (all its runs) a comparison reads
RESAMPLES = 1000  # bootstrap resamples, as `tokenpace compare`
CHART_RECORDS = 500  # records a side the CDFs draw (evenly spaced in each run's finishing order)
STEPS_KEY = "_steps"  # reads each side's sampled records, for the charts only
CDF_METRICS = (("ttft", "TTFT"), ("tpot", "TPOT"), ("e2e", "E2E"))


def _resolve(store: Store, ref: str, side: str) -> RunInfo:
    if not ref:
        raise BadAsk(f"{side.lower()}: pick run {side} (a run id, a baseline name or key=value)")
    try:
        return store.resolve(ref)
    except StoreError as exc:
        raise NotFound(f"run {side}: {exc}") from None


def _check_size(store: Store, run: RunInfo, single: bool, side: str) -> None:
    _, ids = side_runs(store, run, single)
    count = sum(r.record_count for r in (store.get_run(i) for i in ids) if r is not None)
    if count > RECORDS_MAX:
        raise BadAsk(
            f"side {side} holds {count:,} records, more than the console compares ({RECORDS_MAX:,}): "
            "use tokenpace compare"
        )


def _compare(
    store: Store, a: RunInfo, b: RunInfo, exact: bool, single: bool, allow_invalid: bool
) -> tuple[RunComparison, str]:
    """The comparison and the method it used: ``stored`` figures unless ``exact`` or missing."""
    if not exact:
        rc = compare_stored(store, a.id, b.id, allow_invalid=allow_invalid, single=single)
        if rc is not None:
            return rc, "stored"
    _check_size(store, a, single, "A")
    _check_size(store, b, single, "B")
    return compare_runs(
        store, a.id, b.id, resamples=RESAMPLES, allow_invalid=allow_invalid, single=single
    ), "exact"


def compare_data(store: Store, ask: Ask) -> dict[str, Any]:
    a = _resolve(store, ask.text("a"), "A")
    b = _resolve(store, ask.text("b"), "B")
    single = ask.text("single") == "1"
    allow_invalid = ask.text("allow_invalid") == "1"
    exact = ask.text("exact") == "1"
    try:
        rc, method = _compare(store, a, b, exact, single, allow_invalid)
    except RunNotJudgeable as exc:
        raise BadAsk(f"{exc} (on this page: add allow_invalid=1)") from None
    data = rc.to_dict()
    judged = (("A", a, rc.runs_a or [a.id]), ("B", b, rc.runs_b or [b.id]))  # NOT VALID members left out
    return data | {
        "method_used": method,
        "exact_asked": exact,
        "single": single,
        "allow_invalid": allow_invalid,
        "verdicts": {m["metric"]: m["verdict"] for m in data["metrics"]},
        STEPS_KEY: partial(_samples, store, judged),  # read for the charts only, never the JSON
    }


def _samples(store: Store, judged: tuple[tuple[str, RunInfo, list[str]], ...]) -> list[F.Step]:
    """Each side's records for the CDFs: an even sample of every run, ``CHART_RECORDS`` a side."""
    per_run = max(1, CHART_RECORDS // max(len(ids) for _, _, ids in judged))
    return [
        F.Step(f"{side}: {run.id}" + (f" (+{len(ids) - 1} runs)" if len(ids) > 1 else ""), {}, recs)
        for side, run, ids in judged
        for recs in [[r for i in ids for r in store.sample_records(i, per_run)]]
    ]


def _bound(row: dict[str, Any], i: int) -> float:
    ci = row.get("rel_ci")
    return float(ci[i]) if ci and ci[i] is not None else float(row["rel"])


def _differences(data: dict[str, Any]) -> go.Figure:
    fig = go.Figure()
    fig.update_layout(
        title="B against A: each percentile's change with its interval",
        yaxis_title="relative change (B/A - 1)",
        yaxis_tickformat="+.0%",
        **F.LAYOUT,
    )
    for m in data["metrics"]:
        rows = [r for r in m["percentiles"] if r.get("rel") is not None]
        if not rows:
            continue
        lo = [r["rel"] - _bound(r, 0) for r in rows]
        hi = [_bound(r, 1) - r["rel"] for r in rows]
        fig.add_trace(
            go.Scatter(
                x=[f"{m['title']} {r['percentile'].upper()}" for r in rows],
                y=[r["rel"] for r in rows],
                error_y={"type": "data", "symmetric": False, "array": hi, "arrayminus": lo},
                mode="markers",
                name=m["title"],
                text=[r["verdict"] for r in rows],
            )
        )
    for y in (-data["min_effect"], data["min_effect"]):
        fig.add_hline(y=y, line_dash="dot", line_color="#7f7f7f")
    return fig


def compare_charts(data: dict[str, Any]) -> list[Chart]:
    steps: list[F.Step] = data[STEPS_KEY]()
    figures = [_differences(data)] + [F.cdf(steps, key, name) for key, name in CDF_METRICS]
    return [Chart(str(f.layout.title.text), f) for f in figures]
