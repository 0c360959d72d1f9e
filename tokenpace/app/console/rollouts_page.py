"""The gateway sessions and rollouts pages: the gateway sessions stored (their runs are kind
``gateway``, labelled ``gateway_session``), and one session's arms over time (traffic share, the load
each arm carried, latency percentiles, error and business-event rates, each configuration change
a marker) with the guards' verdict on each step of the rollout: ``app/rollout/arms_timeline.py``,
drawn by ``adapters/report/arms_html.py``'s figures (the same as ``arms --html``). The session's
read (``read_traffic``) does not depend on the guards: the console keeps it (``Ask.kept``), so the
page and each guard a user tries next cost one read while the session's records are unchanged."""

from __future__ import annotations

import dataclasses
from typing import Any

from tokenpace.adapters.report.arms_html import arms_figures, iso, steps_table
from tokenpace.adapters.store import RunInfo, Store
from tokenpace.app.console.page import Ask, BadAsk, Chart, NotFound
from tokenpace.app.rollout.arms import ArmsQuery, Traffic, read_traffic
from tokenpace.app.rollout.arms_timeline import arms_over_time
from tokenpace.app.rollout.terms import parse_guards

SCAN_MAX = 5000  # newest gateway runs read to list the sessions
RUNS_MAX = 500  # runs of one session read (one per arm, config epoch and upstream)
RECORD_BYTES, TOKEN_BYTES = 1200, 48  # about, in memory: a decoded record (no tokens), a token time


def sessions_data(store: Store, ask: Ask) -> dict[str, Any]:
    sessions: dict[str, dict[str, Any]] = {}
    for run in store.list_runs({"kind": "gateway"}, limit=SCAN_MAX):
        name = run.labels.get("gateway_session")
        if not name or run.labels.get("shadow") == "true":
            continue
        row = sessions.setdefault(
            name,
            {"session": name, "started_at": run.started_at, "arms": [], "requests": 0, "epochs": set()},
        )
        row["started_at"] = min(row["started_at"], run.started_at)
        row["requests"] += run.record_count
        row["epochs"].add(run.labels.get("config_epoch", "0"))
        row["fleet"] = run.labels.get("gateway_fleet")
        if (arm := run.labels.get("arm")) and arm not in row["arms"]:
            row["arms"].append(arm)
    rows = sorted(sessions.values(), key=lambda r: r["started_at"], reverse=True)
    for row in rows:
        row["config_changes"] = len(row.pop("epochs")) - 1
        row["arms"].sort()  # by name: the order runs were stored in is the traffic's, not a meaning
    return {"sessions": rows}


def _session_runs(store: Store, ask: Ask) -> tuple[str, list[RunInfo]]:
    session = ask.path("session") or ask.text("session")  # the query's: report --arms, offline
    return session, store.list_runs({"kind": "gateway", "gateway_session": session}, limit=RUNS_MAX)


def session_stamp(store: Store, ask: Ask) -> tuple[tuple[str, int], ...]:
    """What a kept answer depends on besides the store's runs: the session's records so far (a
    running gateway appends to its runs)."""
    return _stamp(_session_runs(store, ask)[1])


def _stamp(runs: list[RunInfo]) -> tuple[tuple[str, int], ...]:
    return tuple((r.id, r.record_count) for r in runs)


def _traffic(store: Store, ask: Ask, query: ArmsQuery, runs: list[RunInfo]) -> Traffic | None:
    """The session's window as read for another guard (the read holds no guard: it is judged under
    this query's), else read now and kept; None: read where judged (no console keeps reads, or the
    window moves with the clock: ``since=1h``)."""
    if ask.kept is None or ask.relative("since") or ask.relative("until"):
        return None
    key = ("traffic", query.session, query.since_unix, query.until_unix, _stamp(runs))
    read = ask.kept.get(key, lambda: read_traffic(store, query), held_bytes)
    return dataclasses.replace(read, query=query)


def held_bytes(traffic: Traffic) -> int:
    """About the memory a read holds: a decoded record's fields and labels, and its token times."""
    records = sum(len(r.records) for r in traffic.runs)
    tokens = sum(len(rec.token_ns) for r in traffic.runs for rec in r.records)
    return RECORD_BYTES * records + TOKEN_BYTES * tokens


def rollout_data(store: Store, ask: Ask) -> dict[str, Any]:
    session, runs = _session_runs(store, ask)
    if not runs:
        raise NotFound(f"no stored gateway session {session!r}")
    guard_text = ask.text("guard")
    try:
        guards = parse_guards(guard_text) if guard_text else []
    except ValueError as exc:
        raise BadAsk(f"guard: {exc}") from None
    since = ask.when("since") or min(r.started_unix for r in runs)
    try:
        # arms' own defaults (alpha, resamples, seed): each step's verdict is the one ``arms`` gives
        query = ArmsQuery(since, ask.when("until"), tuple(guards), session=session)
        over = arms_over_time(store, query, _traffic(store, ask, query, runs))
    except ValueError as exc:
        raise NotFound(str(exc)) from None
    doc = over.to_dict()
    headers, rows = steps_table(doc["steps"])
    return {
        "session": session,
        "guard": guard_text,
        "since": iso(doc["since_unix"]),
        "until": iso(doc["until_unix"]),
        "bucket_s": doc["timeline"]["bucket_s"],
        "min_bucket_n": doc["timeline"]["min_bucket_n"],
        "warnings": doc["warnings"],
        "steps_table": {"headers": headers, "rows": rows},
        "changes": [{**c, "when": iso(c["unix_s"])} for c in doc["timeline"]["changes"]],
        **{k: doc[k] for k in ("steps", "timeline")},
    }


def rollout_charts(data: dict[str, Any]) -> list[Chart]:
    return [Chart(str(f.layout.title.text), f) for f in arms_figures(data["timeline"])]
