"""The numbers of a run or a sweep as tables: one source for the console, Markdown, CSV and HTML.

Every table is (headers, rows) with raw values (None for missing); ``fmt`` renders one for people.
"""

from __future__ import annotations

import math
import re
from typing import Any

from tokenpace.core.stats import ci_from_json

Table = tuple[list[str], list[list[Any]]]

LATENCY_METRICS = (
    ("TTFT", "ttft_ms"),
    ("TTFAT (answer)", "ttfat_ms"),
    ("TPOT", "tpot_ms"),
    ("ITL", "itl_ms"),
    ("E2E", "e2e_ms"),
)
LATENCY_COLUMNS = ("mean", "p50", "p90", "p95", "p99", "max")


def is_sweep(doc: dict[str, Any]) -> bool:
    return doc.get("kind") == "sweep" or "steps" in doc


def fmt(value: Any, digits: int = 1) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        if value != 0 and abs(value) < 0.1:
            return f"{value:.3g}"
        return f"{value:.{digits}f}"
    return str(value)


DEFAULT_PERCENTILES = ("p50", "p90", "p95", "p99")


def percentile_names(summary: dict[str, Any]) -> list[str]:
    """The percentiles shown: those asked with --percentiles, else P50, P90, P95 and P99."""
    asked = (summary.get("percentiles") or {}).get("metrics") or {}
    for points in asked.values():
        return [p["name"] for p in points]
    return list(DEFAULT_PERCENTILES)


def percentile_points(summary: dict[str, Any], key: str) -> list[dict[str, Any]]:
    """Each shown percentile of one metric: {"name", "value", "ci95" ([lo, hi] or None), "low_sample"};
    from the asked block when it has the metric, else from the metric's distribution."""
    names = percentile_names(summary)
    asked = ((summary.get("percentiles") or {}).get("metrics") or {}).get(key)
    if asked:
        return list(asked)
    dist = summary.get(key) or {}
    cis = dist.get("ci95") or {}
    low = set(dist.get("low_sample") or [])
    return [{"name": n, "value": dist.get(n), "ci95": cis.get(n), "low_sample": n in low} for n in names]


def interval(ci: Any) -> str:
    """A 95 % interval as people read it: [11.9, 13.0]; a side the data cannot bound (None, or
    infinite) open: [98.1, unbounded) ("" when there is none)."""
    bounds = ci_from_json(ci)
    if bounds is None:
        return ""
    lo, hi = bounds
    left = "(unbounded" if math.isinf(lo) else f"[{fmt(lo)}"
    right = "unbounded)" if math.isinf(hi) else f"{fmt(hi)}]"
    return f"{left}, {right}"


INTERVAL_NOTE = (
    "[a, b]: the 95 % confidence interval of the percentile (distribution-free, from the order "
    "statistics); ~ marks a percentile with fewer than 5 samples beyond it; [a, unbounded): too few "
    "effective samples beyond it to bound that side (more requests, or a longer run)"
)


def latency_table(summary: dict[str, Any], with_ci: bool = False) -> Table:
    """Mean, the shown percentiles, max and n per metric; ``with_ci``: each percentile as text with
    its interval (Markdown and HTML), else raw numbers (CSV)."""
    names = percentile_names(summary)
    headers = ["metric (ms)", "mean", *names, "max", "n"]
    rows = []
    for label, key in LATENCY_METRICS:
        dist = summary.get(key) or {}
        if not dist.get("n"):
            continue
        cells: list[Any] = []
        for point in percentile_points(summary, key):
            if with_ci:
                mark = "~" if point["low_sample"] else ""
                cells.append(f"{mark}{fmt(point['value'])} {interval(point['ci95'])}".strip())
            else:
                cells.append(point["value"])
        rows.append([label, dist.get("mean"), *cells, dist.get("max"), dist["n"]])
    return headers, rows


def throughput_table(summary: dict[str, Any]) -> Table:
    rows: list[list[Any]] = [
        ["requests/s (ok)", summary.get("request_throughput")],
        ["output tokens/s", summary.get("output_token_throughput")],
        ["total tokens/s", summary.get("total_token_throughput")],
        ["output tokens/s per user (1/TPOT P50)", summary.get("per_user_output_token_throughput")],
        ["goodput requests/s (met every SLO)", summary.get("goodput")],
        ["error rate", summary.get("error_rate")],
        ["window s", summary.get("window_s")],
    ]
    return ["throughput", "value"], [r for r in rows if r[1] is not None]


def load_label(result: dict[str, Any]) -> str:
    load = result["conditions"]["load"]
    if load["mode"] == "closed_loop":
        return f"c={load['concurrency']}"
    return f"{load['rate']:g} rps"


def conditions_table(result: dict[str, Any], sweep: dict[str, Any] | None = None) -> Table:
    """The conditions of a run; of a sweep's first step with the load ladder in place of its load."""
    c = result["conditions"]
    load = c["load"]
    wl = c.get("workload") or {}
    counts = result["summary"].get("counts") or {}
    mode = (
        f"closed loop, concurrency {load['concurrency']}"
        if load["mode"] == "closed_loop"
        else f"open loop, {load['rate']:g} req/s {load.get('arrival') or ''}".rstrip()
        + (f", cap {load['max_concurrency']}" if load.get("max_concurrency") else "")
    )
    rows = [
        ["model", c.get("model")],
        ["endpoint", c.get("endpoint")],
        ["target", c.get("target")],
        ["api", f"{c.get('api')}{'' if c.get('stream', True) else ' (no stream)'}"],
        ["load", mode],
        ["requests", f"{counts.get('sent')} (+{load.get('warmup', 0)} warm-up)"],
        ["input tokens", (wl.get("input_len") or {}).get("spec")],
        ["output tokens", (wl.get("output_len") or {}).get("spec")],
        ["seed", c.get("seed")],
        ["sampling", ", ".join(f"{k}={v}" for k, v in (c.get("sampling") or {}).items())],
        ["SLO", ", ".join(f"{k[:-3]} <= {v:g} ms" for k, v in (c.get("slo") or {}).items()) or None],
        ["labels", ", ".join(f"{k}={v}" for k, v in (c.get("labels") or {}).items()) or None],
        ["started", c.get("started_at")],
        ["tool", f"tokenpace {(c.get('tool') or {}).get('version', '')}"],
        ["client", (c.get("client_host") or {}).get("hostname")],
        ["valid", _validity(result)],
    ]
    if sweep is not None:
        ladder = ", ".join(load_label(s) for s in sweep.get("steps") or [])
        labels = {k: v for k, v in (c.get("labels") or {}).items() if not k.startswith("sweep_")}
        for row in rows:
            if row[0] == "load":
                row[1] = f"sweep ({sweep.get('mode')}): {ladder}; {mode.split(',')[0]}"
            elif row[0] == "requests":
                row[1] = f"{load.get('requests') or '-'} per step (+{load.get('warmup', 0)} warm-up)"
            elif row[0] == "labels":
                row[1] = ", ".join(f"{k}={v}" for k, v in labels.items()) or None
    return ["condition", "value"], [r for r in rows if r[1] not in (None, "")]


def sweep_conditions(sweep: dict[str, Any]) -> tuple[Table, Table]:
    """A sweep's conditions: those every step shares (its load as the ladder), and per step its load
    and each condition that differs between the steps (start time, validity, requests sent...)."""
    steps = sweep.get("steps") or []
    own = [dict(conditions_table(step)[1]) for step in steps]
    as_sweep = [dict(conditions_table(step, sweep)[1]) for step in steps]  # no sweep_* labels
    keys = list(dict.fromkeys(k for rows in own for k in rows))

    def differ(rows: list[dict[str, Any]], key: str) -> bool:
        return len({repr(r.get(key)) for r in rows}) > 1

    varies = [k for k in keys if k not in ("load", "labels") and differ(own, k)]
    varies += ["labels"] if differ(as_sweep, "labels") else []
    shared = [[k, v] for k, v in (as_sweep[0] if as_sweep else {}).items() if k not in varies]
    numbers = step_numbers(sweep)
    per_step = [
        [numbers[i + 1], load_label(step), *((as_sweep if k == "labels" else own)[i].get(k) for k in varies)]
        for i, step in enumerate(steps)
    ]
    return (["condition", "value"], shared), (["step", "load", *varies], per_step)


def steady_rps(summary: dict[str, Any]) -> Any:
    """A step's request rate over its steady window when it has one, else over the whole run."""
    steady = summary.get("steady") or {}
    if steady.get("request_throughput") is not None and not steady.get("short"):
        return steady["request_throughput"]
    return summary.get("request_throughput")


def _pct(summary: dict[str, Any], metric: str, p: str, with_ci: bool = False) -> Any:
    """A step's percentile: the number, or (``with_ci``) the text with its 95 % interval."""
    dist = summary.get(metric) or {}
    if not with_ci or dist.get(p) is None:
        return dist.get(p)
    return f"{fmt(dist[p])} {interval((dist.get('ci95') or {}).get(p))}".strip()


def step_numbers(sweep: dict[str, Any]) -> dict[int, int]:
    """Each curve step's place (1-based, what the analysis counts) -> the number its progress line,
    its run id and its records file carry (probe steps and short attempts rerun longer by --auto
    take numbers too), so every table and sentence names a step as the progress did."""
    return {
        i + 1: int((step.get("sweep_step") or {}).get("index") or i + 1)
        for i, step in enumerate(sweep.get("steps") or [])
    }


_STEP_WORD = re.compile(r"\b(step )(\d+)\b")


def renumber(line: str, numbers: dict[int, int]) -> str:
    """'step 5' (a curve place) -> 'step 7' (its number in the progress lines and files)."""
    return _STEP_WORD.sub(lambda m: m.group(1) + str(numbers.get(int(m.group(2)), m.group(2))), line)


def steps_table(sweep: dict[str, Any], with_ci: bool = False) -> Table:
    """One row per curve step, with the knee, SLO verdict and Little's-law status beside it. Throughput
    is over the step's steady window (ramp-up and drain excluded; shown) when it has one."""
    analysis = sweep.get("analysis") or {}
    knee = (analysis.get("knee") or {}).get("index")
    slo = analysis.get("slo_capacity") or {}
    holds = slo.get("verdicts") or slo.get("holds") or []
    little = {c["step"]: c["status"] for c in (analysis.get("littles_law") or {}).get("steps", [])}
    headers = [
        "step",
        "load",
        "req/s",
        "out tok/s",
        "steady s",
        "ramp-up s",
        "drain s",
        "req/s whole run",
        "TTFT p50",
        "TTFT p95",
        "TTFT p99",
        "TPOT p50",
        "TPOT p95",
        "E2E p50",
        "E2E p95",
        "E2E p99",
        "goodput",
        "errors",
        "Little",
    ]
    if holds:
        headers.append("SLO")
    gpu = any(_step_gpu(step) != [None, None, None] for step in sweep.get("steps") or [])
    if gpu:  # the leading indicators beside the queue (gpu_metrics, server_metrics steady means)
        headers += ["GPU util %", "GPU W", "waiting"]
    headers.append("note")
    rows = []
    numbers = step_numbers(sweep)
    for i, step in enumerate(sweep.get("steps") or []):
        s = step["summary"]
        notes = []
        if knee == i:
            notes.append("knee")
        if step.get("interrupted"):
            notes.append("interrupted")
        if not step.get("valid", True) and not step.get("interrupted"):
            notes.append("NOT VALID")
        steady = s.get("steady") or {}
        if steady.get("short"):
            notes.append("short")
        use_steady = steady.get("request_throughput") is not None and not steady.get("short")
        row = [
            numbers[i + 1],
            load_label(step),
            steady_rps(s),
            steady["output_token_throughput"] if use_steady else s.get("output_token_throughput"),
            steady.get("window_s"),
            steady.get("excluded_ramp_up_s"),
            steady.get("excluded_drain_s"),
            s.get("request_throughput"),
            _pct(s, "ttft_ms", "p50", with_ci),
            _pct(s, "ttft_ms", "p95", with_ci),
            _pct(s, "ttft_ms", "p99", with_ci),
            _pct(s, "tpot_ms", "p50", with_ci),
            _pct(s, "tpot_ms", "p95", with_ci),
            _pct(s, "e2e_ms", "p50", with_ci),
            _pct(s, "e2e_ms", "p95", with_ci),
            _pct(s, "e2e_ms", "p99", with_ci),
            s.get("goodput"),
            s.get("error_rate"),
            little.get(i + 1),
        ]
        if holds:
            row.append(holds[i] if i < len(holds) else None)
        if gpu:
            row += _step_gpu(step)
        row.append(", ".join(notes))
        rows.append(row)
    return headers, rows


def _step_gpu(step: dict[str, Any]) -> list[Any]:
    """GPU utilisation and power (means over GPUs) and requests waiting, over the step's steady window."""
    gpu = (step.get("gpu_metrics") or {}).get("steady") or {}
    queue = (step.get("server_metrics") or {}).get("steady") or {}
    return [(gpu.get(k) or {}).get("mean") for k in ("util_pct", "power_w")] + [
        (queue.get("waiting") or {}).get("mean")
    ]


def _validity(result: dict[str, Any]) -> str | None:
    """`yes`, or `no: ` and why the client's numbers cannot be trusted for the load asked."""
    valid = result.get("valid")
    if valid is None:
        return None
    if valid:
        return "yes: the client kept up with the load asked"
    reasons = result.get("invalid_reasons") or ((result.get("summary") or {}).get("client") or {}).get(
        "invalid_reasons"
    )
    return "no: " + ("; ".join(reasons) if reasons else "the client did not keep up with the load asked")
