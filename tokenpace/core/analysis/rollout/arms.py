"""A gray release judged: per arm, requests, users, latency percentiles with intervals, error and
interruption rates and each business event's rate; each candidate arm against the reference (B - A
with an interval); the sample-ratio check first; one verdict from the operator's guard rails. Pure.

Events are joined to arms by request id through the records (which carry the arm and a hash of the
user's sticky key), else by the arm the gateway found when the event came; an event whose arm stays
unknown is counted apart, never dropped silently.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tokenpace.core.analysis.comparison.compare import Comparison, compare_samples, pct_name
from tokenpace.core.analysis.evidence.rates import Share, ShareDiff, share, share_diff, z_for
from tokenpace.core.analysis.evidence.verdict import DEFAULT_MIN_EFFECT, Verdict
from tokenpace.core.analysis.rollout.guards import Evidence, Guard, GuardItem, check_event_guards, judge
from tokenpace.core.analysis.rollout.load_match import (
    MATCHED,
    UNCHECKED,
    UNMATCHED,
    ArmLoad,
    LoadMatch,
    MatchedChange,
    arm_load,
    at_matched_load,
    match_load,
    sample_memo,
    unmatched_item,
)
from tokenpace.core.analysis.rollout.matched_strata import SampleMemo
from tokenpace.core.analysis.rollout.sample_size import too_few_item
from tokenpace.core.analysis.rollout.srm import SrmResult, srm_check
from tokenpace.core.events import UNKNOWN_ARM, OutcomeEvent
from tokenpace.core.exit_codes import verdict_code
from tokenpace.core.record import FAILURE_STATUSES, RequestRecord, Status
from tokenpace.core.stats import Distribution, describe

LATENCY = ("ttft", "tpot", "e2e")
PERCENTILES = (50.0, 90.0, 95.0, 99.0)
MIN_SHARE_N = 30  # requests (or users) on each arm before a rate's guard is judged
PROMOTE, ROLL_BACK, HOLD = "promote", "roll back", "hold"


@dataclass(slots=True)
class EventRates:
    count: int
    per_request: Share  # share of the arm's requests with the event (reported by request id)
    per_user: Share  # share of the arm's users with the event (by request id or user id)

    def to_dict(self) -> dict[str, Any]:
        return {
            "count": self.count,
            "per_request": self.per_request.to_dict(),
            "per_user": self.per_user.to_dict(),
        }


@dataclass(slots=True)
class ArmStats:
    arm: str
    weight: float | None
    requests: int
    users: int
    latency: dict[str, Distribution]
    errors: Share
    interruptions: Share
    events: dict[str, EventRates]
    load: ArmLoad | None = None  # requests in flight on its upstream(s) at dispatch

    def to_dict(self) -> dict[str, Any]:
        return {
            "arm": self.arm,
            "weight": self.weight,
            "requests": self.requests,
            "users": self.users,
            "load_at_dispatch": self.load.to_dict() if self.load else None,
            "latency_ms": {k: v.to_dict() for k, v in self.latency.items()},
            "error_rate": self.errors.to_dict(),
            "interruption_rate": self.interruptions.to_dict(),
            "events": {k: v.to_dict() for k, v in self.events.items()},
        }


@dataclass(slots=True)
class ArmDiff:
    """A candidate arm against the reference: positive = larger on the candidate."""

    arm: str
    latency: Comparison
    errors: ShareDiff
    interruptions: ShareDiff
    events: dict[str, tuple[ShareDiff, ShareDiff]]  # (per request, per user)
    requests: int = 0  # the fewer of the two arms'
    users: int = 0
    span_s: float | None = None  # the window the arms' requests were sent over
    load: LoadMatch | None = None  # the arms' loads at dispatch, and whether they were matched
    matched: dict[str, tuple[MatchedChange, float]] = field(default_factory=dict)  # metric.pNN -> (, SE)

    def per_s(self, n: int) -> float | None:
        """``n`` (the smaller arm's requests or users) per second of the window."""
        return n / self.span_s if self.span_s and self.span_s > 0 else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "arm": self.arm,
            "load": self.load.to_dict() if self.load else None,
            "latency": self.latency.to_dict(),
            "error_rate": self.errors.to_dict(),
            "interruption_rate": self.interruptions.to_dict(),
            "events": {
                k: {"per_request": r.to_dict(), "per_user": u.to_dict()} for k, (r, u) in self.events.items()
            },
        }


@dataclass(slots=True)
class ArmsReport:
    reference: str
    arms: list[ArmStats]
    diffs: list[ArmDiff]
    srm: list[SrmResult]
    guards: list[GuardItem]
    verdict: str
    reason: str
    unmatched_events: int
    warnings: list[str] = field(default_factory=list)
    candidate: str | None = None  # the one arm judged (a canary against its baseline), else every other

    @property
    def exit_code(self) -> int:
        return int(verdict_code(self.verdict))

    @property
    def split_broken(self) -> bool:
        return any(r.flagged for r in self.srm)

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "reason": self.reason,
            "exit_code": self.exit_code,
            "reference": self.reference,
            "candidate": self.candidate,
            "sample_ratio": [r.to_dict() for r in self.srm],
            "arms": [a.to_dict() for a in self.arms],
            "diffs": [d.to_dict() for d in self.diffs],
            "guards": [g.to_dict() for g in self.guards],
            "unmatched_events": self.unmatched_events,
            "warnings": list(self.warnings),
        }


def resolve_events(
    records_by_arm: Mapping[str, Sequence[RequestRecord]], events: Sequence[OutcomeEvent]
) -> tuple[list[OutcomeEvent], int]:
    """Each event with the arm (and user) of its stored request where there is one; the count of
    events whose arm is still unknown (kept out of every arm's rates)."""
    by_request: dict[str, tuple[str, str | None]] = {}
    for arm, records in records_by_arm.items():
        for r in records:
            by_request[r.request_id] = (arm, r.labels.get("user"))
    out, unmatched = [], 0
    for e in events:
        known = by_request.get(e.request_id) if e.request_id else None
        if known is not None:
            e = OutcomeEvent(
                e.event, known[0], e.unix_s, e.request_id, e.user or known[1], e.upstream, e.value
            )
        if e.arm == UNKNOWN_ARM:
            unmatched += 1
            continue
        out.append(e)
    return out, unmatched


def arm_stats(
    arm: str,
    memo: SampleMemo,  # the arm's records and its samples by metric (``sample_memo``)
    events: Sequence[OutcomeEvent],
    names: Sequence[str],
    weight: float | None,
    alpha: float,
    metrics: Sequence[str] = LATENCY,
) -> ArmStats:
    sent = [r for r in memo.records if not r.warmup]
    request_ids = {r.request_id for r in sent}
    users = {u for r in sent if (u := r.labels.get("user"))}
    failed = sum(1 for r in sent if r.status in FAILURE_STATUSES)
    cut = sum(1 for r in sent if r.status is Status.STREAM_INTERRUPTED)
    rates = {}
    for name in names:
        mine = [e for e in events if e.arm == arm and e.event == name]
        by_request = {e.request_id for e in mine if e.request_id in request_ids}
        by_user = {e.user for e in mine if e.user in users}
        rates[name] = EventRates(
            len(mine), share(len(by_request), len(sent), alpha), share(len(by_user), len(users), alpha)
        )
    latency = {m: describe(memo(m).values) for m in metrics}
    errors, cuts = share(failed, len(sent), alpha), share(cut, len(sent), alpha)
    return ArmStats(arm, weight, len(sent), len(users), latency, errors, cuts, rates, arm_load(sent))


def arm_diff(
    ref: ArmStats,
    cand: ArmStats,
    memos: Mapping[str, SampleMemo],  # each arm's records and samples by metric (``sample_memo``)
    percentiles: Sequence[float],
    alpha: float,
    resamples: int,
    seed: int,
    metrics: Sequence[str] = LATENCY,
) -> ArmDiff:
    # Arms share one window: no noise between runs to count. The table calls a change faster or
    # slower by compare's practical threshold (5 %), not whenever its interval excludes zero; the
    # guards judge against their own limits. Both at matched load (load_match), where recorded.
    # Each metric drawn with its own seed (its place in LATENCY): a subset's rows are the table's.
    mine = memos[ref.arm], memos[cand.arm]
    compared = [
        compare_samples(
            m, [mine[0](m).samples], [mine[1](m).samples], percentiles, alpha, DEFAULT_MIN_EFFECT,
            resamples, seed + LATENCY.index(m), same_window=True,
        )
        for m in metrics
    ]  # fmt: skip
    latency = Comparison(alpha, DEFAULT_MIN_EFFECT, compared)
    events = {
        name: (
            share_diff(ref.events[name].per_request, cand.events[name].per_request, alpha),
            share_diff(ref.events[name].per_user, cand.events[name].per_user, alpha),
        )
        for name in ref.events
    }
    loads = (ref.load, cand.load) if ref.load is not None and cand.load is not None else None
    load = match_load(ref.arm, mine[0].records, cand.arm, mine[1].records, mine, loads)
    return ArmDiff(
        cand.arm,
        latency,
        share_diff(ref.errors, cand.errors, alpha),
        share_diff(ref.interruptions, cand.interruptions, alpha),
        events,
        min(ref.requests, cand.requests),
        min(ref.users, cand.users),
        load=load,
        matched=at_matched_load(latency, load, seed),
    )


def guarded_metrics(guards: Sequence[Guard]) -> tuple[str, ...]:
    """The latency metrics a guard reads a percentile of, in LATENCY's order."""
    read = {g.percentile[0] for g in guards if g.percentile}
    return tuple(m for m in LATENCY if m in read)


def guard_item(guard: Guard, diff: ArmDiff, alpha: float = 0.05) -> GuardItem:
    pct = guard.percentile
    if pct is not None:
        metric, q = pct
        row = diff.latency.metric(metric).row(pct_name(q)) if metric in LATENCY else None
        state = diff.load.state if diff.load is not None else UNCHECKED
        if row is not None and diff.load is not None and state == UNMATCHED:  # never faster or slower
            shared = diff.matched.get(f"{metric}.{row.percentile}")
            per_s = diff.per_s(shared[0].n if shared else diff.requests)
            return unmatched_item(guard, diff.arm, diff.load, shared, per_s, alpha)
        if row is None or row.verdict is Verdict.TOO_FEW or row.change is None:
            # at matched load, the requests an arm would take before the percentile can be estimated
            short = too_few_item(guard, diff.arm, diff.load, diff.span_s) if row is not None else None
            return short or judge(guard, diff.arm, Evidence(None, None), alpha)
        if state == MATCHED:
            mc, mc_se = diff.matched[f"{metric}.{row.percentile}"]
            ev = Evidence(mc.rel, mc_se, mc.n, "requests at matched load", diff.per_s(mc.n))
        else:
            ev = Evidence(row.rel, row.change.se_log, diff.requests, "requests", diff.per_s(diff.requests))
        return judge(guard, diff.arm, ev, alpha)
    unit = "requests"
    if guard.name in ("error_rate", "interruption_rate"):
        d, n = (diff.errors if guard.name == "error_rate" else diff.interruptions), diff.requests
    else:
        name, per_request = guard.event or (guard.name, False)
        pair = diff.events.get(name, (ShareDiff(None, None),) * 2)  # refused before: see known_events
        d, n = (pair[0], diff.requests) if per_request else (pair[1], diff.users)
        unit = "requests" if per_request else "users"
    if n < MIN_SHARE_N:
        return GuardItem(
            guard, diff.arm, d.diff, d.ci, "undecided", f"fewer than {MIN_SHARE_N} {unit} on an arm ({n})"
        )
    se = (d.ci[1] - d.ci[0]) / (2 * z_for(alpha)) if d.ci is not None else None
    return judge(guard, diff.arm, Evidence(d.diff, se, n, unit, diff.per_s(n)), alpha)


def decide(srm: Sequence[SrmResult], items: Sequence[GuardItem], guards: Sequence[Guard]) -> tuple[str, str]:
    broken = [r for r in srm if r.flagged]
    if broken:
        units = " and ".join(r.unit for r in broken)
        return (
            HOLD,
            f"sample ratio mismatch in {units} (p < 0.001): the split is broken, fix it before judging",
        )
    if not guards:
        return HOLD, "no guard rails given (--guard ttft.p95=+10%,error_rate=+0.5pp,...)"
    breached = [i for i in items if i.outcome == "breached"]
    if breached:
        return ROLL_BACK, "; ".join(f"{i.arm} {i.guard.name} {i.reason}" for i in breached)
    waiting = [i for i in items if i.outcome in ("hold", "undecided")]
    if waiting:
        return HOLD, "; ".join(f"{i.arm} {i.guard.name} {i.reason}" for i in waiting)
    if not items:
        return HOLD, "no candidate arm with traffic to judge"
    return PROMOTE, "every guard rail holds: each interval lies within its limit"


def _split_checks(
    stats: Mapping[str, ArmStats], weights: Mapping[str, float], expected: Mapping[str, Mapping[str, float]]
) -> list[SrmResult]:
    """The split is judged on users, the unit the router splits: requests of one user are not
    independent (one heavy user moves the request counts of a correct router), so the request-level
    test is shown but decides nothing -- unless no request carries a user, when it is all there is."""
    with_users = any(s.users for s in stats.values())
    users = srm_check({a: s.users for a, s in stats.items()}, expected.get("users") or weights, "users")
    requests = srm_check(
        {a: s.requests for a, s in stats.items()},
        expected.get("requests") or weights,
        "requests",
        judged=not with_users,
    )
    return [r for r in (users, requests) if r is not None]


def _span_s(records: Mapping[str, Sequence[RequestRecord]]) -> float | None:
    sent = [r.sent_ns for rs in records.values() for r in rs if not r.warmup and r.sent_ns]
    return (max(sent) - min(sent)) / 1e9 if len(sent) > 1 else None


def analyse_arms(
    records_by_arm: Mapping[str, Sequence[RequestRecord]],
    events: Sequence[OutcomeEvent],
    weights: Mapping[str, float],
    guards: Sequence[Guard] = (),
    reference: str | None = None,
    alpha: float = 0.05,
    resamples: int = 1000,
    seed: int = 0,
    expected: Mapping[str, Mapping[str, float]] | None = None,
    known_events: Sequence[str] | None = None,
    candidate: str | None = None,
    metrics: Sequence[str] = LATENCY,
) -> ArmsReport:
    """``weights``: the configured split per arm (arm order = config order; the first is the
    reference unless ``reference`` names another); ``candidate``: the one arm judged against the
    reference (the canary against its baseline; the other arms shown, not judged), else every
    other arm; ``expected``: per unit (users, requests), the expected share of each arm when the
    window spans sessions with different splits; ``known_events``: every event name ever reported
    (default: those in ``events``); ``metrics``: the latency metrics described and compared
    (``guarded_metrics``: only what the guards read, the same verdict). Raises ValueError on a
    reference or candidate with no arm, or a guard on an event name nobody reported."""
    order = list(dict.fromkeys([*weights, *records_by_arm]))
    reference = reference or (order[0] if order else None)
    known = ", ".join(order) or "none"
    if reference is None or reference not in order:
        raise ValueError(f"no arm {reference!r} in the window (arms: {known})")
    if candidate is not None and candidate not in order:
        raise ValueError(f"no arm {candidate!r} in the window (arms: {known})")
    if candidate == reference:
        raise ValueError(f"the candidate {candidate!r} is the arm it would be judged against")
    records = {arm: list(records_by_arm.get(arm, ())) for arm in order}
    joined, unmatched = resolve_events(records, events)
    check_event_guards(guards, sorted({*(known_events or ()), *(e.event for e in events)}))
    guarded = {g.event[0] for g in guards if g.event}  # known, perhaps not reported in this window
    names = sorted({e.event for e in joined} | guarded)
    memos = {a: sample_memo(records[a]) for a in order}  # each arm's samples of a metric, taken once
    stats = {a: arm_stats(a, memos[a], joined, names, weights.get(a), alpha, metrics) for a in order}
    srm = _split_checks(stats, weights, expected or {})
    percentiles = sorted({*PERCENTILES, *(g.percentile[1] for g in guards if g.percentile)})
    diffs = [
        arm_diff(stats[reference], stats[a], memos, percentiles, alpha, resamples, seed, metrics)
        for a in order
        if a != reference and stats[a].requests > 0 and candidate in (None, a)
    ]
    span = _span_s(records)
    for d in diffs:
        d.span_s = span
    items = [guard_item(g, d, alpha) for d in diffs for g in guards]
    verdict, reason = decide(srm, items, guards)
    warnings = []
    if not any(s.users for s in stats.values()) and srm:
        warnings.append("no request carries a user: the split is judged on requests, taken as independent")
    if unmatched:
        warnings.append(f"{unmatched} event(s) name a request the store does not hold: counted, not judged")
    if not weights:
        warnings.append("no configured split stored with these runs: the sample-ratio check is skipped")
    warnings += [f"{d.arm}: {d.load.reason}" for d in diffs if d.load and d.load.state == UNCHECKED]
    if candidate is not None and len(order) > 2:
        others = ", ".join(a for a in order if a not in (reference, candidate))
        warnings.append(f"judged: {candidate} against {reference} only; {others} shown, not judged")
    return ArmsReport(
        reference, [stats[a] for a in order], diffs, srm, items, verdict, reason, unmatched, warnings,
        candidate,
    )  # fmt: skip
