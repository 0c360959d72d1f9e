"""Progress with an ETA on long commands, and a sweep's steps numbered alike in the progress lines,
the table, the sentences and the file names when --auto reruns a short step."""

from __future__ import annotations

import asyncio
import io

import pytest
from rich.console import Console

from tokenpace.adapters.report.plan_lines import plan_lines
from tokenpace.adapters.report.tables import steps_table
from tokenpace.cli.bench.run_view import BenchProgress, clock, eta_s
from tokenpace.core.record import RequestRecord, Status


def test_eta_by_count_by_duration_and_whichever_ends_first():
    assert eta_s(10.0, 25, 100, None) == pytest.approx(30.0)  # a quarter done in 10 s
    assert eta_s(10.0, 0, None, 60.0) == pytest.approx(50.0)
    assert eta_s(10.0, 25, 100, 20.0) == pytest.approx(10.0)  # the duration ends first
    assert eta_s(10.0, 0, 100, None) is None  # no pace yet
    assert (clock(7.4), clock(185), clock(3725)) == ("7s", "3m05s", "1h02m")


def test_the_bar_counts_every_record_and_draws_them_on_its_refresh():
    async def go() -> tuple[float, dict]:
        bar = BenchProgress(Console(file=io.StringIO(), force_terminal=True), quiet=False)
        bar.started(10, None)
        for status in (Status.OK, Status.TIMEOUT, Status.OK):
            bar.record(RequestRecord("r", status=status))
        bar.refresh()  # what the ticker does every REFRESH_S
        task = bar.progress.tasks[0]
        bar.finished()
        return task.completed, dict(task.fields)

    completed, fields = asyncio.run(go())
    assert completed == 3
    assert fields["status"] == "2 ok, 1 failed" and fields["count"] == "3/10"


def _step(index: int, superseded: bool = False) -> dict:
    summary = {"ttft_ms": {"p95": 10.0 * index}, "tpot_ms": {}, "e2e_ms": {}, "steady": {}}
    return {"sweep_step": {"index": index, "superseded_as_short": superseded}, "summary": summary,
            "conditions": {"load": {"mode": "closed_loop", "concurrency": index}}}  # fmt: skip


def test_a_rerun_step_keeps_the_number_of_its_progress_line_and_files():
    # steps 1-4 ran; step 4 was short and rerun longer as step 5: the curve is 1, 2, 3, 5
    sweep = {
        "steps": [_step(1), _step(2), _step(3), _step(5)],
        "analysis": {
            "knee": {"index": 3, "load_rps": 9.0, "metric": "TTFT", "latency_ms": 50.0},
            "used_steps": [1, 2, 3, 4],
            "left_out_steps": [{"step": 4, "reasons": ["short"]}],
        },
    }
    headers, rows = steps_table(sweep)
    assert [row[headers.index("step")] for row in rows] == [1, 2, 3, 5]
    lines = plan_lines(sweep)
    assert "Figures rest on step(s) 1, 2, 3, 5" in lines
    assert "Left out: step 5 (short)" in lines
    assert any("step 5); method: Kneedle" in line for line in lines)
