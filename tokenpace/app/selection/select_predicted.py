"""Predicted candidates for `tokenpace select`: the sweep file `tokenpace sim --virtual
--predicted-sweep FILE` writes (the same file `tokenpace plan` reads), judged by the measured rules.

Its steps become load points as a stored sweep's do (run_point), with attainment and goodput counted
on each step's per-request sample and the intervals widened by the calibration's fit error
(core/analysis/selection/predicted.py). Nothing of it goes to the store.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from tokenpace.adapters.results import read_result
from tokenpace.core.analysis.selection.predicted import sample_meeting, widen
from tokenpace.core.analysis.selection.scenarios import Scenario, ScenarioError
from tokenpace.core.analysis.selection.select import RunPoint, run_point

__all__ = ["predicted_points", "read_predicted"]


def read_predicted(ref: str) -> dict[str, Any] | None:
    """The predicted sweep a candidate names (a JSON file marked ``predicted``), else None."""
    if not ref.endswith(".json") or not Path(ref).is_file():
        return None
    try:
        doc = read_result(Path(ref))
    except (OSError, ValueError) as exc:
        raise ScenarioError(f"{ref}: not a tokenpace sweep or result file ({exc})") from None
    if not isinstance(doc, dict) or not doc.get("predicted"):
        return None
    if doc.get("kind") != "sweep" or not isinstance(doc.get("steps"), list) or not doc["steps"]:
        raise ScenarioError(f"{ref}: a predicted file without steps (write it with sim --predicted-sweep)")
    return doc


def _good(step: dict[str, Any], scenario: Scenario) -> int | None:
    """Requests of the step meeting every line, scaled from its sample to everything it sent."""
    sample = step.get("sample")
    if not sample:
        return None
    good, n = sample_meeting(sample, scenario)
    sent = int(((step.get("summary") or {}).get("counts") or {}).get("sent", 0))
    return round(good / n * sent) if n else None


def predicted_points(ref: str, doc: dict[str, Any], scenario: Scenario) -> list[RunPoint]:
    """Each predicted step as a load point named ``sweep_id#k``, its intervals widened."""
    error = float((doc.get("predicted") or {}).get("fit_error") or 0.0)
    points = []
    for k, step in enumerate(doc["steps"], 1):
        try:
            point = run_point(f"{doc.get('sweep_id', 'predicted')}#{k}", step, _good(step, scenario))
        except (KeyError, TypeError, ValueError) as exc:
            raise ScenarioError(f"{ref}: cannot read predicted step {k} ({exc})") from None
        points.append(replace(point, values=widen(point.values, error)))
    return points
