"""The live pages: runs in progress (and lately ended) with their figures so far (the store's
``live_runs`` rows, ``app/watch/live.py``), and one live run's page, which the console's live script
(``static/live.js``) refreshes from its /api twin every ``POLL_MS`` until the run has ended."""

from __future__ import annotations

import time
from typing import Any

import plotly.graph_objects as go

from tokenpace.adapters.report.figures import LAYOUT
from tokenpace.adapters.store import LiveRun, Store
from tokenpace.app.console.page import Ask, Chart, NotFound

POLL_MS = 500  # the live page asks its /api twin twice a second: each once-a-second publish is seen
STALE_S = 10.0  # a run not ended whose figures have not moved for this long has died (killed)
ROWS_MAX = 200  # live runs listed (the store keeps ended ones a day)


def _num(figures: dict[str, Any], *keys: str) -> Any:
    value: Any = figures
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def live_row(live: LiveRun, now: float) -> dict[str, Any]:
    f = live.figures
    stale = not live.ended and now - live.updated_unix > STALE_S
    return {
        "run_id": live.run_id,
        "kind": live.kind,
        "state": "no word for a while: the run may have died" if stale else live.state,
        "ended": live.ended,
        "stale": stale,
        "started_unix": live.started_unix,
        "updated_unix": live.updated_unix,
        "labels": live.labels,
        "elapsed_s": _num(f, "elapsed_s"),
        "done": _num(f, "done"),
        "in_flight": _num(f, "in_flight"),
        "ttft_p50_ms": _num(f, "p50", "ttft_ms"),
        "ttft_p95_ms": _num(f, "p95", "ttft_ms"),
        "tokens_per_s": _num(f, "recent_tokens_per_s"),
        "error_rate": _num(f, "error_rate"),
    }


def live_data(store: Store, ask: Ask) -> dict[str, Any]:
    now = time.time()
    rows = [live_row(r, now) for r in store.live_runs()[:ROWS_MAX]]
    return {
        "running": [r for r in rows if not r["ended"] and not r["stale"]],
        "ended": [r for r in rows if r["ended"] or r["stale"]],
    }


def live_run_data(store: Store, ask: Ask) -> dict[str, Any]:
    run_id = ask.path("run_id")
    live = store.get_live(run_id)
    if live is None:
        raise NotFound(
            f"no live figures of run {run_id!r} (a run publishes them while it stores to this store)"
        )
    row = live_row(live, time.time())
    return {
        "run": row,
        "figures": live.figures,
        "stored": live.ended and store.get_run(run_id) is not None,
        "poll_ms": POLL_MS,
    }


def live_run_charts(data: dict[str, Any]) -> list[Chart]:
    """TTFT P50/P95 and output tokens/s of each interval so far (the live script redraws them)."""
    series = data["figures"].get("series") or []
    t = [p["t"] for p in series]
    axis = "seconds since start"
    ttft = go.Figure()
    ttft.update_layout(title="TTFT per interval", xaxis_title=axis, yaxis_title="ms", **LAYOUT)
    for key, name in (("ttft_p50", "P50"), ("ttft_p95", "P95")):
        ttft.add_trace(go.Scatter(x=t, y=[p[key] for p in series], name=name, mode="lines+markers"))
    tokens = go.Figure()
    title = "Output tokens/s per interval"
    tokens.update_layout(title=title, xaxis_title=axis, yaxis_title="tokens/s", **LAYOUT)
    tokens.add_trace(go.Scatter(x=t, y=[p["tok_s"] for p in series], name="tokens/s", mode="lines+markers"))
    return [Chart("TTFT per interval", ttft), Chart("Output tokens/s per interval", tokens)]
