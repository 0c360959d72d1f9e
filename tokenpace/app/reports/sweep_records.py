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
from tokenpace.core.analysis.capacity.drift import trend_dict
from tokenpace.core.record import RequestRecord
from tokenpace.core.steady import steady_state

__all__ = ["refresh_steady", "step_records"]


def step_records(base: Path, step: dict[str, Any], note: Callable[[str], None]) -> list[RequestRecord]:
    """The step's records from the file its result names, beside the sweep; [] when there are none."""
    name = (step.get("records") or {}).get("path")
    if not name:
        return []
    path = base / name
    try:
        return read_records(path)
    except FileNotFoundError:
        note(f"{path} not found: step figures as stored, no intervals from resampling")
    except (OSError, ValueError, TypeError) as exc:
        note(f"{path} unreadable ({str(exc).splitlines()[0] if str(exc) else exc}): left out of resampling")
    return []


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
