"""Use case: ``tokenpace arms`` — the gateway's arms over a time window, judged as a gray release.

Reads the real-traffic runs the gateway stored (kind ``gateway``, one per session, config epoch and
upstream), keeps the records sent within the window (each record's time from its run's clock
anchor; the window starts no earlier than the split's last live change, so each step of a rollout
is judged on its own, in one gateway session), the outcome events received within it, and the
split each epoch was configured with; the analysis is ``tokenpace.core.analysis.rollout.arms``.
The window is read once (``read_traffic``); a step of it is cut from what was read (``cut``), so
the timeline and every step's verdict (``arms_timeline``) cost one read of the session.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from tokenpace.adapters.store import RunInfo, Store
from tokenpace.core.analysis.rollout.arms import LATENCY, ArmsReport, analyse_arms, guarded_metrics
from tokenpace.core.analysis.rollout.guards import Guard
from tokenpace.core.events import ConfigChange, OutcomeEvent
from tokenpace.core.record import RequestRecord


@dataclass(frozen=True, slots=True)
class ArmsQuery:
    """What ``tokenpace arms`` judges (the console's rollout page and ``report --arms`` ask the same):
    the window, which traffic, the guard rails, and the bootstrap behind the intervals.
    ``fleet``: only the replicas of that fleet (all of them), else every gateway session;
    ``candidate``: the one arm judged against ``reference`` (a canary against its baseline)."""

    since_unix: float
    until_unix: float | None = None
    guards: tuple[Guard, ...] = ()
    reference: str | None = None
    session: str | None = None
    alpha: float = 0.05
    resamples: int = 1000
    seed: int = 0
    fleet: str | None = None
    candidate: str | None = None


@dataclass(slots=True)
class ArmsWindow:
    since_unix: float
    until_unix: float | None
    sessions: list[str] = field(default_factory=list)  # newest first
    records: dict[str, list[RequestRecord]] = field(default_factory=dict)  # by arm, config order
    events: list[OutcomeEvent] = field(default_factory=list)
    weights: dict[str, float] = field(default_factory=dict)  # the newest session's split
    expected: dict[str, dict[str, float]] = field(default_factory=dict)  # unit -> arm -> share
    warnings: list[str] = field(default_factory=list)
    sent_unix: dict[str, list[float]] = field(default_factory=dict)  # by arm, beside ``records``


@dataclass(slots=True)
class StoredRun:
    info: RunInfo
    sent_unix: list[float]  # beside ``records``
    records: list[RequestRecord]  # measured (no warm-up), sent within the query's window, in order


@dataclass(slots=True)
class Traffic:
    """A query's window as stored, read once: each gateway run's records sent within it (newest run
    first), the outcome events and configuration changes within it, every event name known."""

    query: ArmsQuery
    runs: list[StoredRun]
    events: list[OutcomeEvent]
    changes: list[ConfigChange]
    event_names: list[str]


def _sent_unix(rec: RequestRecord, clock: dict[str, Any]) -> float | None:
    perf, unix = clock.get("perf_ns"), clock.get("unix_ns")
    if not rec.sent_ns or perf is None or unix is None:
        return None
    return float(unix + rec.sent_ns - perf) / 1e9


def _split_weights(run: RunInfo) -> dict[str, float]:
    weights: dict[str, float] = {}
    for up in run.conditions.get("gateway", {}).get("split", []):
        weights[up["arm"]] = weights.get(up["arm"], 0.0) + float(up.get("weight", 0.0))
    return weights


def _ramping(run: RunInfo, since_unix: float) -> list[str]:
    started = run.started_unix
    return [
        up["arm"]
        for up in run.conditions.get("gateway", {}).get("split", [])
        if up.get("ramp_s") and started + float(up["ramp_s"]) > since_unix
    ]


def _within(t: float, since_unix: float, until_unix: float | None) -> bool:
    return t >= since_unix and (until_unix is None or t < until_unix)


def _outside(run: RunInfo, since_unix: float, until_unix: float | None) -> bool:
    """Stored for the last time before the window, or started after it."""
    return run.stored_unix < since_unix or (until_unix is not None and run.started_unix >= until_unix)


def read_traffic(store: Store, query: ArmsQuery) -> Traffic:
    """The one read of the store behind a report, a timeline and its steps."""
    since, until = query.since_unix, query.until_unix
    where = {"kind": "gateway", "source": "gateway"}
    where |= {"gateway_session": query.session} if query.session else {}
    if query.fleet:  # every replica's session of that fleet
        where["gateway_fleet"] = query.fleet
    runs = []
    for run in store.list_runs(where):
        if _outside(run, since, until) or run.labels.get("shadow") == "true":  # a mirror's: no user saw them
            continue
        clock = run.conditions.get("clock", {})
        timed = [
            (t, r)
            for r in store.load_records(run.id)
            if not r.warmup and (t := _sent_unix(r, clock)) is not None and _within(t, since, until)
        ]
        if timed:
            runs.append(StoredRun(run, [t for t, _ in timed], [r for _, r in timed]))
    sessions = _sessions(store, query.session, query.fleet)
    events = store.load_events(since, until, sessions)
    changes = store.load_config_changes(since, until, sessions)
    return Traffic(query, runs, events, changes, store.event_names())


def cut(traffic: Traffic, since_unix: float, until_unix: float | None) -> ArmsWindow:
    """The window [since, until) of what was read (within the query's own window)."""
    window = ArmsWindow(since_unix, until_unix)
    # a session's config epoch (its split) -> arm -> users, requests
    per_session: dict[str, dict[str, dict[str, set[Any] | int]]] = {}
    splits: dict[str, dict[str, float]] = {}
    ramping: set[str] = set()
    for stored in traffic.runs:
        run = stored.info
        if _outside(run, since_unix, until_unix):
            continue
        timed = [
            (t, r)
            for t, r in zip(stored.sent_unix, stored.records, strict=True)
            if _within(t, since_unix, until_unix)
        ]
        kept = [r for _, r in timed]
        if not kept:
            continue
        sess, arm = run.labels.get("gateway_session", run.id), run.labels.get("arm", run.id)
        if sess not in window.sessions:
            window.sessions.append(sess)
        sess = f"{sess}/{run.labels.get('config_epoch', '0')}"  # each epoch's split on its own
        if sess not in splits:
            splits[sess] = _split_weights(run)
            ramping.update(_ramping(run, since_unix))
        window.records.setdefault(arm, []).extend(kept)
        window.sent_unix.setdefault(arm, []).extend(t for t, _ in timed)
        tally = per_session.setdefault(sess, {}).setdefault(arm, {"users": set(), "requests": 0})
        tally["users"] |= {u for r in kept if (u := r.labels.get("user"))}  # type: ignore[operator]
        tally["requests"] += len(kept)  # type: ignore[operator]
    if splits:
        window.weights = next(iter(splits.values()))  # the newest
        order = list(window.weights) + [a for a in window.records if a not in window.weights]
        window.records = {a: window.records[a] for a in order if a in window.records}
        window.sent_unix = {a: window.sent_unix[a] for a in window.records}
    window.expected = _expected(per_session, splits)
    if len({tuple(sorted(w.items())) for w in splits.values()}) > 1:
        window.warnings.append(
            f"the split changed within the window ({len(splits)} sessions or config epochs): the "
            "sample-ratio check expects each one's counts under its own weights"
        )
    if ramping:
        window.warnings.append(
            f"arm(s) {', '.join(sorted(ramping))} were ramping within the window: the sample-ratio check "
            "assumes full weight; start the window after the ramp (--since)"
        )
    window.events = [e for e in traffic.events if _within(e.unix_s, since_unix, until_unix)]
    return window


def load_window(store: Store, query: ArmsQuery) -> ArmsWindow:
    return cut(read_traffic(store, query), query.since_unix, query.until_unix)


def _sessions(store: Store, session: str | None, fleet: str | None) -> list[str] | None:
    """The gateway sessions to read events and changes of: one, a fleet's (its replicas'), or all."""
    if session:
        return [session]
    if fleet:
        runs = store.list_runs({"kind": "gateway", "gateway_fleet": fleet})
        return sorted({s for r in runs if (s := r.labels.get("gateway_session"))})
    return None


def _expected(
    per_session: dict[str, Any], splits: dict[str, dict[str, float]]
) -> dict[str, dict[str, float]]:
    """Per unit, each arm's expected count: every session's total spread by that session's weights."""
    out: dict[str, dict[str, float]] = {"users": {}, "requests": {}}
    for sess, arms in per_session.items():
        weights = splits.get(sess, {})
        total_weight = sum(w for w in weights.values() if w > 0)
        if total_weight <= 0:
            continue
        for unit in out:
            n = sum(len(t["users"]) if unit == "users" else t["requests"] for t in arms.values())
            for arm, w in weights.items():
                out[unit][arm] = out[unit].get(arm, 0.0) + n * max(w, 0.0) / total_weight
    return out


def arms_report(
    store: Store, query: ArmsQuery, traffic: Traffic | None = None
) -> tuple[ArmsWindow, ArmsReport]:
    """Raises ValueError (one line for the user) when the window holds no gateway traffic. The
    window starts at the split's last live change, when one falls inside it (said in a warning).
    ``traffic``: the query's window already read (``read_traffic``), else read here."""
    return judge(traffic or read_traffic(store, query), query.since_unix, query.until_unix)


def judge(
    traffic: Traffic, since_unix: float, until_unix: float | None, guarded_only: bool = False
) -> tuple[ArmsWindow, ArmsReport]:
    """The report on [since, until) of what was read, from the split's last move within it.
    ``guarded_only``: the arms' latency compared only where a guard reads it (each metric's rows
    and the verdict as the whole report's: the same seed a metric), for a step's verdict."""
    query = traffic.query
    moved = [c for c in traffic.changes if _within(c.unix_s, since_unix, until_unix) and _moves(c)]
    change = moved[-1] if moved else None
    if change is not None:
        since_unix = change.unix_s
    window = cut(traffic, since_unix, until_unix)
    if change is not None:
        window.warnings.insert(0, change_note(change))
    if not window.records:
        raise ValueError(
            "no gateway traffic stored in this window (tokenpace gateway stores it; widen --since)"
        )
    report = analyse_arms(
        window.records,
        window.events,
        window.weights,
        query.guards,
        query.reference,
        query.alpha,
        query.resamples,
        query.seed,
        window.expected,
        traffic.event_names,
        query.candidate,
        guarded_metrics(query.guards) if guarded_only else LATENCY,
    )
    report.warnings = window.warnings + report.warnings
    return window, report


def _moves(change: ConfigChange) -> bool:
    """The change moved the split (weights or arms)."""
    return ConfigChange.weights(change.before) != ConfigChange.weights(change.after)


def change_note(change: ConfigChange) -> str:
    when = datetime.fromtimestamp(change.unix_s, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    split = lambda side: ", ".join(f"{a}={w:g}" for a, w in ConfigChange.weights(side).items())  # noqa: E731
    return (
        f"judged since the split's last change, {when} (epoch {change.epoch}, by {change.who}): "
        f"{split(change.before)} -> {split(change.after)}"
    )


def change_lines(store: Store, since_unix: float, until_unix: float | None, session: str | None) -> list[str]:
    """Each configuration change in the window, oldest first: when, session and epoch, who, what."""
    out = []
    for c in store.load_config_changes(since_unix, until_unix, [session] if session else None):
        when = datetime.fromtimestamp(c.unix_s, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
        split = lambda side: ", ".join(f"{a}={w:g}" for a, w in ConfigChange.weights(side).items())  # noqa: E731
        moved = f": {split(c.before)} -> {split(c.after)}" if split(c.before) != split(c.after) else ""
        out.append(f"{when}  session {c.session} epoch {c.epoch}  {', '.join(c.changed)}{moved}  by {c.who}")
    return out
