"""A sweep's Markdown report gives the conditions every step shares as the sweep's, and per step
only what differs (never step 1's start time or validity as the whole sweep's); an interval's side
the run cannot bound reads "unbounded" in every format."""

from __future__ import annotations

import csv
import io
import math
from typing import Any

from tokenpace.adapters.report.exports import to_csv, to_markdown
from tokenpace.adapters.report.tables import interval, sweep_conditions


def _step(i: int, concurrency: int, valid: bool, sent: int = 40) -> dict[str, Any]:
    return {
        "conditions": {
            "model": "m", "endpoint": "http://127.0.0.1:8000/v1", "api": "openai-chat",
            "load": {"mode": "closed_loop", "concurrency": concurrency, "requests": 40, "warmup": 1},
            "workload": {"input_len": {"spec": "8:64"}, "output_len": {"spec": "6"}},
            "seed": 7, "sampling": {"temperature": 0.0},
            "labels": {"team": "a", "sweep_id": "sw1", "sweep_step": str(i)},
            "started_at": f"2026-12-06T07:0{i}:00+00:00", "tool": {"version": "0.1.0"},
        },
        "summary": {"counts": {"sent": sent, "ok": sent}},
        "valid": valid,
        "invalid_reasons": [] if valid else ["the client stalled"],
        "sweep_step": {"index": i},
    }  # fmt: skip


SWEEP = {
    "kind": "sweep",
    "sweep_id": "sw1",
    "mode": "concurrency",
    "steps": [_step(1, 1, True), _step(2, 4, False)],
}


def test_shared_conditions_are_the_sweeps_and_what_differs_is_per_step() -> None:
    (_, shared), (headers, per_step) = sweep_conditions(SWEEP)
    rows: dict[str, Any] = dict(shared)
    assert rows["seed"] == 7 and rows["labels"] == "team=a" and rows["requests"] == "40 per step (+1 warm-up)"
    assert rows["load"].startswith("sweep (concurrency): c=1, c=4")
    assert "started" not in rows and "valid" not in rows  # they differ: step 1's are not the sweep's
    assert headers == ["step", "load", "started", "valid"]
    assert per_step[0][:3] == [1, "c=1", "2026-12-06T07:01:00+00:00"]
    assert per_step[1][1] == "c=4" and per_step[1][3].startswith("no: the client stalled")


def test_a_condition_that_differs_moves_to_the_per_step_table() -> None:
    sweep = {**SWEEP, "steps": [_step(1, 1, True, sent=40), _step(2, 4, True, sent=33)]}
    (_, shared), (headers, per_step) = sweep_conditions(sweep)
    assert "requests" not in dict(shared) and "valid" in dict(shared)
    assert headers == ["step", "load", "requests", "started"]
    assert [row[2] for row in per_step] == ["40 (+1 warm-up)", "33 (+1 warm-up)"]


def test_markdown_has_both_tables() -> None:
    md = to_markdown({**SWEEP, "analysis": {}, "plan": {}})
    shared = md.split("## Test conditions (every step)")[1].split("## Conditions that differ")[0]
    assert "| seed | 7 |" in shared and "07:01:00" not in shared
    assert "| step | load | started | valid |" in md and "| 2 | c=4 | 2026-12-06T07:02:00+00:00 | no:" in md


def test_a_side_the_run_cannot_bound_reads_unbounded_never_as_a_number() -> None:
    assert interval([98.14, 120.0]) == "[98.1, 120.0]"
    assert interval([98.14, None]) == "[98.1, unbounded)" == interval((98.14, math.inf))
    assert interval([None, 12.0]) == "(unbounded, 12.0]" and interval(None) == ""
    assert interval([None, None]) == "(unbounded, unbounded)"  # neither side bounded
    ttft = {"n": 200, "p50": 90.0, "p95": 98.1, "ci95": {"p50": [85.0, 95.0], "p95": [93.0, None]}}
    rows = list(csv.reader(io.StringIO(to_csv({"summary": {"ttft_ms": ttft}}))))
    assert ["latency_ms", "TTFT", "p95_ci95_high", "unbounded"] in rows
    assert ["latency_ms", "TTFT", "p95_ci95_low", "93.0"] in rows
