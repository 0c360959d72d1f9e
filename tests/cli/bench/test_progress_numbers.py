"""Progress with an ETA on long commands, and a sweep's steps numbered alike in the progress lines,
the table, the sentences and the file names when --auto reruns a short step."""

from __future__ import annotations

import asyncio
import io
import re

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


def test_the_live_line_shows_ttft_p50_p95_and_tokens_per_second():
    from tokenpace.core.analysis.diagnosis.live_figures import ClientNow, LiveFigures

    ms = 1_000_000
    recs = [
        RequestRecord(
            f"r{i}", sent_ns=i * ms, first_token_ns=i * ms + ttft * ms,
            token_ns=[i * ms + ttft * ms + k * 5 * ms for k in range(4)], output_tokens_counted=4,
            end_ns=i * ms + ttft * ms + 20 * ms, status=Status.OK,
        )
        for i, ttft in enumerate([100] * 19 + [400])
    ]  # fmt: skip
    snapshot = LiveFigures().fold(recs, 2.0, ClientNow())

    async def go() -> dict:
        bar = BenchProgress(Console(file=io.StringIO(), force_terminal=True), quiet=False)
        bar.started(100, None)
        assert bar.progress.tasks[0].fields["figures"] == ""  # nothing to show before any figure
        bar.live(snapshot)
        bar.refresh()
        fields = dict(bar.progress.tasks[0].fields)
        bar.finished()
        return fields

    figures = asyncio.run(go())["figures"]
    m = re.fullmatch(r"TTFT P50 ([\d.]+) P95 ([\d.]+) ms, 40 tok/s, TPOT P95 ([\d.]+) ms", figures)
    assert m is not None, figures  # 80 tokens in 2 s
    p50, p95, tpot = map(float, m.groups())
    assert (p50, p95, tpot) == (pytest.approx(100, rel=0.01), pytest.approx(115, rel=0.01), 5.0)
