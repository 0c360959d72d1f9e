"""A sweep's records read back for its capacity plan: each step's steady state and latency trend
measured again from its records with today's estimators (``core.steady``, ``drift``), so that a plan
on an older sweep file does not rest on a rate an earlier estimator got wrong, and the records kept
for the plan's intervals (resampling).

Records that are not beside the sweep leave the stored figures as they were (``note`` says so).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from tokenpace.adapters.results import read_records
from tokenpace.app.sweep.sweep import capacity
from tokenpace.core.analysis.capacity.drift import trend_dict
from tokenpace.core.record import RequestRecord
from tokenpace.core.steady import steady_state

__all__ = ["plan_from_sweep", "refresh_steady", "step_records"]


def step_records(
    base: Path,
    step: dict[str, Any],
    note: Callable[[str], None],
    missing: str = "step figures as stored, no intervals from resampling",
    unreadable: str = "left out of resampling",
) -> list[RequestRecord]:
    """The step's records from the file its result names, beside the sweep; [] when there are none
    (a file not found or unreadable is said through ``note``, with what that costs)."""
    name = (step.get("records") or {}).get("path")
    if not name:
        return []
    path = base / name
    try:
        return read_records(path)
    except FileNotFoundError:
        note(f"{path} not found: {missing}")
    except (OSError, ValueError, TypeError) as exc:
        note(f"{path} unreadable ({str(exc).splitlines()[0] if str(exc) else exc}): {unreadable}")
    return []


def plan_from_sweep(
    path: Path,
    doc: dict[str, Any],
    slo: dict[str, float] | None,
    percentile: str | None,
    max_error_rate: float,
    peak_rps: float | None,
    headroom: float,
) -> list[str]:
    """The sweep's capacity plan, added to ``doc``: each step (and the revisit) re-measured from its
    records beside the sweep, then analysed with them (intervals from resampling). Returns the notes
    on records that could not be read; KeyError, TypeError or ValueError on steps it cannot analyse."""
    notes: list[str] = []
    records = []
    for step in [*doc["steps"], *(doc.get("revisit") or [])]:
        if isinstance(step, dict):
            recs = step_records(path.parent, step, notes.append)
            refresh_steady(step, recs)
            records.append(recs)
    records = records[: len(doc["steps"])]  # the curve's; the revisit's only re-measured
    slo = slo if slo is not None else doc.get("slo") or None
    pct = percentile or doc.get("slo_percentile") or "p95"
    plateau = doc.get("probe_plateau_rps")
    revisit = (doc.get("revisit") or [None])[0]
    caveats = (doc.get("predicted") or {}).get("caveats") or ()
    args = (slo, pct, max_error_rate, peak_rps, headroom, plateau, revisit, records)
    off_curve = [
        d for d in [*(doc.get("probe") or []), *(doc.get("short_attempts") or [])] if isinstance(d, dict)
    ]
    doc.update(capacity(doc["steps"], *args, caveats=caveats, off_curve=off_curve))
    return notes


def refresh_steady(step: dict[str, Any], records: list[RequestRecord]) -> None:
    """Replace the step's stored steady state and latency trend by ones measured from its records
    (a step run with a ramp-up keeps its stored steady state: the ramp's length is not in the file)."""
    load = (step.get("conditions") or {}).get("load") or {}
    if not records:
        return
    closed = load.get("mode") == "closed_loop"
    step["time_trend"] = trend_dict(records, open_loop=not closed)
    if load.get("ramp"):
        return
    concurrency = load.get("concurrency") if closed else None
    summary = step.get("summary")
    if isinstance(summary, dict):
        summary["steady"] = steady_state(records, int(concurrency) if concurrency else None).to_dict()
