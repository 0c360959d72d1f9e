"""The runs page: stored runs, newest first, filtered by label, condition, time, validity and kind;
each row its conditions and headline percentiles with their intervals. Paged (``SIZE_MAX`` rows)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from tokenpace.adapters.store import RunInfo, RunQuery, Store
from tokenpace.app.console.page import Ask, BadAsk
from tokenpace.app.reports.tables import percentile_points

SIZE_DEFAULT, SIZE_MAX = 50, 200  # rows a page
PAGE_MAX = 10_000  # page numbers past it are refused (the offset stays bounded)
KINDS = ("bench", "sweep", "repeat", "gateway", "ab", "import", "predicted")
HEADLINE = (("ttft_ms", "TTFT"), ("tpot_ms", "TPOT"), ("e2e_ms", "E2E"))
HEADLINE_PERCENTILES = ("p50", "p95")


def run_query(ask: Ask) -> tuple[RunQuery, int, int]:
    """The filters of a runs page, its page number and size."""
    kinds = ask.all("kind")
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        raise BadAsk(f"kind: {unknown[0][:40]!r} is not one of {', '.join(KINDS)}")
    valid = ask.text("valid")
    if valid not in ("", "yes", "no"):
        raise BadAsk("valid: yes, no or nothing")
    size = ask.number("size", SIZE_DEFAULT, 1, SIZE_MAX)
    page = ask.number("page", 1, 1, PAGE_MAX)
    query = RunQuery(
        labels=ask.pairs("label"),
        conditions=ask.pairs("cond"),
        since=ask.when("since"),
        until=ask.when("until"),
        valid=None if not valid else valid == "yes",
        kinds=tuple(kinds),
        offset=(page - 1) * size,
        limit=size,
    )
    return query, page, size


def load_text(conditions: dict[str, Any]) -> str:
    load = conditions.get("load")
    if not isinstance(load, dict):
        return ""
    if load.get("mode") == "closed_loop":
        return f"concurrency {load.get('concurrency')}"
    rate = load.get("rate")
    return f"{rate:g} req/s" if isinstance(rate, (int, float)) else str(load.get("mode") or "")


def lengths_text(conditions: dict[str, Any]) -> str:
    wl = conditions.get("workload") or {}
    spec_in = (wl.get("input_len") or {}).get("spec")
    spec_out = (wl.get("output_len") or {}).get("spec")
    return f"in {spec_in} / out {spec_out}" if spec_in or spec_out else ""


def headline(summary: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """P50 and P95 of TTFT, TPOT and E2E, each with its 95 % interval (None where not stored)."""
    out = {}
    for key, name in HEADLINE:
        points = {p["name"]: p for p in percentile_points(summary, key)} if summary.get(key) else {}
        out[name] = [
            {
                "name": q,
                "value": (points.get(q) or {}).get("value"),
                "ci95": (points.get(q) or {}).get("ci95"),
            }
            for q in HEADLINE_PERCENTILES
        ]
    return out


def run_row(run: RunInfo, group: str | None) -> dict[str, Any]:
    c = run.conditions
    return {
        "id": run.id,
        "kind": run.kind,
        "repeat_group": group,
        "started_at": run.started_at,
        "model": run.model,
        "endpoint": run.endpoint,
        "api": c.get("api"),
        "load": load_text(c),
        "lengths": lengths_text(c),
        "labels": run.labels,
        "valid": run.valid,
        "invalid_reasons": list(run.extra.get("invalid_reasons") or []),
        "interrupted": run.interrupted,
        "records": run.record_count,
        "headline": headline(run.summary),
        "output_tokens_per_s": run.summary.get("output_token_throughput"),
        "error_rate": run.summary.get("error_rate"),
    }


def runs_data(store: Store, ask: Ask) -> dict[str, Any]:
    query, page, size = run_query(ask)
    found = store.page_runs(query)
    rows = [run_row(run, found.groups.get(run.id)) for run in found.runs]
    pages = max(1, -(-found.total // size))
    return {
        "filters": {
            "label": ask.all("label"),
            "cond": ask.all("cond"),
            "since": ask.text("since"),
            "until": ask.text("until"),
            "valid": ask.text("valid"),
            "kind": ask.all("kind"),
        },
        "kinds": list(KINDS),
        "page": page,
        "size": size,
        "pages": pages,
        "total": found.total,
        "scanned_all": found.scanned_all,
        "runs": rows,
        "prev": "?" + urlencode(ask.query(page=str(page - 1))) if page > 1 else None,
        "next": "?" + urlencode(ask.query(page=str(page + 1))) if page < pages else None,
    }
