"""Repeat groups in the store: which runs repeated one test, and the noise between runs each group
measured. ``learned_noise`` gives ``compare``/``check``/``history`` the estimates of every group
measured like a given run (same model, API, load, workload and sampling; ``gate_mismatches``)."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import sqlalchemy as sa

from tokenpace.adapters.store import schema as s
from tokenpace.core.analysis.comparison.conditions import gate_mismatches
from tokenpace.core.analysis.evidence.gate_noise import current_host, summary_host
from tokenpace.core.analysis.evidence.runnoise import GroupNoise

# Groups read when learning the noise of one test: the newest this many (a bound on the scan).
MAX_GROUPS_SCANNED = 500


def save_repeat_group(
    conn: sa.Connection,
    group_id: str,
    run_ids: Sequence[str],
    conditions: Mapping[str, Any],
    model: str | None,
    estimates: Sequence[GroupNoise],
) -> None:
    """Store a group of runs and its noise estimates in one transaction."""
    conn.execute(
        sa.insert(s.repeat_groups).values(
            id=group_id,
            stored_unix=time.time(),
            model=model,
            runs=len(run_ids),
            conditions=dict(conditions),
        )
    )
    if run_ids:
        conn.execute(
            sa.insert(s.repeat_runs),
            [{"group_id": group_id, "run_id": r, "position": i} for i, r in enumerate(run_ids)],
        )
    if estimates:
        conn.execute(
            sa.insert(s.run_noise),
            [
                {
                    "group_id": group_id,
                    "key": e.key,
                    "runs": e.runs,
                    "rel_var": e.rel_var,
                    "within_se": e.within_se,
                    "level": e.level,
                }
                for e in estimates
            ],
        )


def group_of(conn: sa.Connection, run_id: str) -> tuple[str, list[str]] | None:
    """The repeat group a run belongs to and its runs still stored, in order; None for a lone run."""
    rr = s.repeat_runs
    gid = conn.execute(sa.select(rr.c.group_id).where(rr.c.run_id == run_id)).scalar()
    if gid is None:
        return None
    q = (
        sa.select(rr.c.run_id)
        .join(s.runs, s.runs.c.id == rr.c.run_id)
        .where(rr.c.group_id == gid)
        .order_by(rr.c.position)
    )
    return str(gid), [r.run_id for r in conn.execute(q)]


def learned_noise(
    conn: sa.Connection,
    conditions: Mapping[str, Any],
    model: str | None,
    exclude: Sequence[str] = (),
) -> list[GroupNoise]:
    """Every stored estimate of a group measured like ``conditions`` (``exclude``: group ids), each
    tagged with the host condition its runs recorded (busy if any run was)."""
    g = s.repeat_groups
    q = sa.select(g.c.id, g.c.conditions).order_by(g.c.stored_unix.desc()).limit(MAX_GROUPS_SCANNED)
    if model is not None:
        q = q.where(g.c.model == model)
    ids = [
        r.id for r in conn.execute(q) if r.id not in exclude and not gate_mismatches(conditions, r.conditions)
    ]
    if not ids:
        return []
    rr = s.repeat_runs
    members = conn.execute(
        sa.select(rr.c.group_id, s.runs.c.summary)
        .join(s.runs, s.runs.c.id == rr.c.run_id)
        .where(rr.c.group_id.in_(ids))
    )
    hosts: dict[str, list[str | None]] = {}
    for m in members:
        hosts.setdefault(m.group_id, []).append(summary_host(m.summary or {}))
    rows = conn.execute(sa.select(s.run_noise).where(s.run_noise.c.group_id.in_(ids)))
    return [
        GroupNoise(r.key, r.runs, r.rel_var, r.within_se, r.level, current_host(hosts.get(r.group_id, [])))
        for r in rows
    ]
