"""Use cases on result files: read a bench result or a sweep back for a report or a capacity plan,
and write the reports (HTML, Markdown, CSV) or the plan. Every problem is a ``ReportError`` whose
text is the one line a command prints."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from tokenpace.adapters.bounded_read import FileBoundError
from tokenpace.adapters.report.exports import to_csv, to_markdown
from tokenpace.adapters.report.figures import Step, make_steps
from tokenpace.adapters.report.html import render_html
from tokenpace.adapters.report.tables import is_sweep
from tokenpace.adapters.results import read_result, write_result
from tokenpace.adapters.safe_files import check_output, write_atomic
from tokenpace.app.reports.sweep_records import step_records
from tokenpace.app.reports.tail_report import TailHops, trace_tail_of_run
from tokenpace.core.asked_percentiles import asked_percentiles, parse_percentiles
from tokenpace.core.record import RequestRecord

__all__ = [
    "ReportError",
    "Step",
    "load_report",
    "load_sweep",
    "markdown",
    "recompute_percentiles",
    "write_plan",
    "write_reports",
]


class ReportError(ValueError):
    """A file that cannot be read or written as asked (one line)."""


def _read(path: Path) -> Any:
    try:
        return read_result(path)
    except FileNotFoundError:
        raise ReportError(f"{path}: no such file") from None
    except FileBoundError as exc:  # past its bound: the file named, with the bound
        raise ReportError(str(exc)) from None
    except (OSError, ValueError) as exc:  # orjson.JSONDecodeError is a ValueError
        raise ReportError(f"{path}: not a tokenpace JSON file ({str(exc).splitlines()[0]})") from None


def load_sweep(path: Path) -> dict[str, Any]:
    """A sweep JSON with finished steps."""
    doc = _read(path)
    if not isinstance(doc, dict) or not is_sweep(doc):
        raise ReportError(f"{path}: not a sweep (run `tokenpace sweep --out FILE` first)")
    if not doc.get("steps"):
        raise ReportError(f"{path}: the sweep has no finished steps")
    return doc


def write_plan(out: Path, sweep_file: Path, doc: dict[str, Any]) -> None:
    """The plan beside its sweep; a simulator's sweep stays marked ``predicted``."""
    plan = {k: doc[k] for k in ("analysis", "plan")}
    if doc.get("predicted"):
        plan["predicted"] = doc["predicted"]
    try:
        write_result(out, {"sweep": str(sweep_file), **plan})
    except OSError as exc:  # a device, a read-only folder
        raise ReportError(str(exc)) from None


def _records(base: Path, result: dict[str, Any], note: Callable[[str], None]) -> list[RequestRecord]:
    return step_records(base, result, note, "charts of records left empty", "left out")


def load_report(path: Path, note: Callable[[str], None]) -> tuple[dict[str, Any], list[Step]]:
    """A result or a sweep, with its steps' records when they are beside it (``note`` says when not)."""
    doc = _read(path)
    if not isinstance(doc, dict):
        raise ReportError(f"{path}: not a tokenpace result or sweep")
    if is_sweep(doc):
        results = doc.get("steps") or []
        if not results:
            raise ReportError(f"{path}: the sweep has no finished steps")
    elif "summary" in doc and "conditions" in doc:
        results = [doc]
    else:
        raise ReportError(f"{path}: not a tokenpace result or sweep (no summary or steps)")
    try:
        return doc, make_steps(results, [_records(path.parent, r, note) for r in results])
    except (KeyError, TypeError) as exc:
        raise ReportError(f"{path}: malformed result ({exc})") from None


def write_reports(
    source: Path,
    doc: dict[str, Any],
    steps: list[Step],
    outputs: dict[str, Path | None],
    title: str | None,
    said: Callable[[str], None],
    traces: Path | None = None,
) -> None:
    """``outputs``: ``{"--html": path, "--md": path, "--csv": path}``; each checked before any is
    written; ``said`` hears "html: PATH" and the like. ``traces``: the HTML report follows the TTFT
    tail hop by hop through this trace file."""
    tail = _tail(doc, steps, traces) if traces is not None else None
    try:
        for flag, path in outputs.items():
            if path:
                check_output(path, flag)
        render = {
            "--html": ("html", lambda: render_html(doc, steps, title, tail)),
            "--md": ("markdown", lambda: to_markdown(doc)),
            "--csv": ("csv", lambda: to_csv(doc)),
        }
        for flag, path in outputs.items():
            if path:
                name, text = render[flag]
                write_atomic(path, text().encode())
                said(f"{name}: {path}")
    except OSError as exc:
        raise ReportError(str(exc)) from None
    except (KeyError, TypeError) as exc:
        raise ReportError(f"{source}: malformed result ({exc})") from None


def _tail(doc: dict[str, Any], steps: list[Step], traces: Path) -> tuple[TailHops, str]:
    if is_sweep(doc) or len(steps) != 1:
        raise ReportError("--traces follows one bench result's tail, not a sweep's")
    if not steps[0].records:
        raise ReportError("--traces needs the run's records (RESULT.records.jsonl beside it)")
    try:
        return trace_tail_of_run(steps[0].records, traces), str(traces)
    except ValueError as exc:
        raise ReportError(str(exc)) from None


def markdown(doc: dict[str, Any]) -> str:
    return to_markdown(doc)


def recompute_percentiles(steps: list[Step], text: str) -> None:
    """``--percentiles``: each run's asked percentiles and their intervals, from its records."""
    try:
        asked = parse_percentiles(text)
    except ValueError as exc:
        raise ReportError(str(exc)) from None
    for step in steps:
        if not step.records:
            raise ReportError("--percentiles needs each run's records (RESULT.records.jsonl beside it)")
        step.result["summary"]["percentiles"] = asked_percentiles(step.records, asked)
