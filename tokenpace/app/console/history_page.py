"""History: one test over time. Runs (the ``run=`` run's test, or those the filters pick; the newest
``RUNS_MAX``) split into series by the conditions a gate holds fixed (a change of conditions starts
a new series); per run a percentile and its interval; NOT VALID runs marked and left out of the
fit; level shifts from core's history analysis (E-divisive, each shift's size with its interval);
baselines marked; the gate's threshold drawn from the series' newest baseline."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tokenpace.adapters.store import RunInfo, RunQuery, Store
from tokenpace.app.baseline.history import refuse_finer_than_sketch
from tokenpace.app.console.history_chart import series_names
from tokenpace.app.console.page import Ask, BadAsk
from tokenpace.app.console.run_page import find_run
from tokenpace.app.console.runs_page import run_query
from tokenpace.core.analysis.comparison.conditions import GATE_FIELDS, GATE_IGNORED, flatten
from tokenpace.core.analysis.comparison.history import (
    DEFAULT_MIN_SHIFT,
    SCALARS,
    analyse_history,
    check_metric,
    summary_value,
)

RUNS_MAX = 120  # newest runs a history reads (the shift search grows faster than the square of it)
SERIES_MAX = 12  # series drawn (the ones with the most runs)
THRESHOLD_DEFAULT = 0.05  # the gate's allowed regression drawn when none is asked
HIGHER_IS_BETTER = ("throughput", "output_token_throughput", "request_throughput", "total_token_throughput",
                    "goodput")  # fmt: skip


def _gated(conditions: Mapping[str, Any]) -> dict[str, Any]:
    """The condition fields a release gate holds fixed (``gate_mismatches``), dotted."""
    return {
        k: v for k, v in flatten(conditions).items() if k.startswith(GATE_FIELDS) and k not in GATE_IGNORED
    }


def test_key(conditions: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """What makes two runs one test: the condition fields a release gate holds fixed."""
    return tuple(sorted((name, repr(value)) for name, value in _gated(conditions).items()))


def metric_name(metric: str) -> str:
    """``ttft.p95`` -> ``P95 TTFT``."""
    if metric in SCALARS:
        return metric.replace("_", " ")
    base, stat = metric.split(".", 1)
    return f"{stat.upper()} {base.upper()}"


def _as_text(value: Any) -> str | None:
    """A scalar condition as the store's ``key=value`` filter reads it (None: not a scalar)."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value) if isinstance(value, (int, float, str)) else None


def _interval(summary: Mapping[str, Any], metric: str) -> list[float | None] | None:
    """The stat's interval as stored: [lo, hi], a side the run could not bound None."""
    if metric in SCALARS:
        return None
    base, stat = metric.split(".", 1)
    ci = ((summary.get(f"{base}_ms") or {}).get("ci95") or {}).get(stat)
    if not ci or len(ci) != 2:
        return None
    return [None if v is None else float(v) for v in ci]


def _parse_threshold(text: str) -> float:
    t = text.strip()
    try:
        value = float(t[:-1]) / 100 if t.endswith("%") else float(t)
    except ValueError:
        raise BadAsk(f"threshold: {t[:20]!r} is not a percentage like 5%") from None
    if not 0 < value < 10:
        raise BadAsk("threshold: between 0% and 1000%")
    return value


def _runs(store: Store, ask: Ask) -> tuple[list[RunInfo], RunInfo | None]:
    ref = ask.text("run")
    if ref:
        anchor = find_run(store, ref)
        same = {k: text for k, v in _gated(anchor.conditions).items() if (text := _as_text(v)) is not None}
        query = RunQuery(conditions=same, limit=RUNS_MAX)
        key = test_key(anchor.conditions)
        runs = [r for r in store.page_runs(query).runs if test_key(r.conditions) == key]
        return runs, anchor
    base, _, _ = run_query(ask)
    query = RunQuery(
        base.labels, base.conditions, base.since, base.until, base.valid, base.kinds, 0, RUNS_MAX
    )
    return store.page_runs(query).runs, None


def _series(
    runs: list[RunInfo], metric: str, baselines: dict[str, list[str]], threshold: float
) -> dict[str, Any]:
    runs = sorted(runs, key=lambda r: r.started_unix)  # oldest first
    points: list[dict[str, Any]] = []
    for r in runs:
        value = summary_value(r.summary, metric)
        if value is None:
            continue
        points.append(
            {
                "run_id": r.id,
                "started_at": r.started_at,
                "value": value,
                "ci95": _interval(r.summary, metric),
                "valid": r.valid,
                "baselines": baselines.get(r.id, []),
            }
        )
    valid = [p for p in points if p["valid"]]
    last_valid = None  # compare refuses a NOT VALID run, so "previous" means the previous valid one
    for p in points:
        p["previous_valid"] = last_valid
        if p["valid"]:
            last_valid = p["run_id"]
    by_id = {r.id: r for r in runs}
    notes = []
    try:
        refuse_finer_than_sketch(metric, DEFAULT_MIN_SHIFT, [by_id[p["run_id"]].summary for p in valid])
    except ValueError as exc:
        notes.append(str(exc))
    hist = analyse_history(
        [(p["run_id"], p["started_at"], by_id[p["run_id"]].summary) for p in valid], metric
    )
    shifts = [hist.to_dict()["change_points"][i] | {"started_at": valid[cp.index]["started_at"]}
              for i, cp in enumerate(hist.change_points)]  # fmt: skip
    minor = [cp.to_dict() | {"run_id": valid[cp.index]["run_id"], "started_at": valid[cp.index]["started_at"]}
             for cp in hist.minor]  # fmt: skip
    based = [p for p in points if p["baselines"]]
    gate = None
    if based:
        worse = -1 if metric in HIGHER_IS_BETTER else 1
        b = based[-1]
        gate = {"baseline": b["baselines"][0], "run_id": b["run_id"], "from": b["started_at"],
                "threshold": threshold, "value": b["value"] * (1 + worse * threshold)}  # fmt: skip
    first = runs[0].conditions if runs else {}
    return {
        "conditions": _gated(first),
        "points": points,
        "fitted_runs": len(valid),
        "not_valid_runs": [p["run_id"] for p in points if not p["valid"]],
        "shifts": shifts,
        "minor_shifts": minor,
        "detectable_shift": hist.detectable,
        "min_size": hist.min_size,
        "method": hist.method,
        "gate": gate,
        "notes": notes,
        "headline": headline(metric, shifts, len(valid), hist.min_size, hist.detectable),
    }


def headline(
    metric: str, shifts: list[dict[str, Any]], fitted: int, min_size: int, detectable: float | None
) -> str:
    name = metric_name(metric)
    if shifts:
        s = shifts[-1]
        size = s.get("rel_change_mean", s.get("rel_change"))
        ci = f" [{s['rel_ci_low']:+.1%}, {s['rel_ci_high']:+.1%}]" if s.get("rel_ci_low") is not None else ""
        return f"{name} shifted {size:+.1%}{ci} on {s['started_at'][:10]} (run {s['run_id']})"
    if fitted < 2 * min_size:
        return f"{name}: too few valid runs to look for a shift ({fitted}; needs {2 * min_size})"
    reach = f"; the smallest shift it would catch: {detectable:+.0%}" if detectable is not None else ""
    return f"{name}: no level shift across {fitted} valid runs{reach}"


def history_data(store: Store, ask: Ask) -> dict[str, Any]:
    try:
        metric = check_metric(ask.text("metric", "ttft.p95"))
    except ValueError as exc:
        raise BadAsk(f"metric: {exc}") from None
    threshold = _parse_threshold(ask.text("threshold", f"{THRESHOLD_DEFAULT:.0%}"))
    runs, anchor = _runs(store, ask)
    baselines: dict[str, list[str]] = {}
    for b in store.baselines():
        baselines.setdefault(b.run_id, []).append(b.name)
    groups: dict[tuple[tuple[str, str], ...], list[RunInfo]] = {}
    for r in runs:
        groups.setdefault(test_key(r.conditions), []).append(r)
    ordered = sorted(groups.values(), key=lambda g: -len(g))[:SERIES_MAX]
    series = [_series(g, metric, baselines, threshold) for g in ordered]
    series.sort(key=lambda s: s["points"][-1]["started_at"] if s["points"] else "", reverse=True)
    for s, name in zip(series, series_names(series), strict=True):
        s["name"] = name
    return {
        "metric": metric,
        "metric_name": metric_name(metric),
        "run": anchor.id if anchor else None,
        "filters": {"label": ask.all("label"), "cond": ask.all("cond")},
        "threshold": threshold,
        "runs_read": len(runs),
        "series_found": len(groups),
        "series": series,
    }
