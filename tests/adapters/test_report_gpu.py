"""The GPUs in the reports: sentences and a per-GPU table over the steady window, the HTML section,
and utilisation on the leading-indicators figure."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

from bench_factory import bench_config

from tokenpace.adapters.report import figures as F
from tokenpace.adapters.report.gpu_lines import gpu_lines, gpu_table
from tokenpace.adapters.report.html import render_html
from tokenpace.app.bench.bench import BenchRun
from tokenpace.core.record import RequestRecord
from tokenpace.sim import SimServer

MS = 1_000_000


def result(series: dict) -> dict:
    load = {"mode": "closed_loop", "concurrency": 1, "warmup": 0}
    conditions: dict[str, Any] = {
        "model": "m",
        "endpoint": "http://127.0.0.1:1/v1",
        "target": "x",
        "api": "openai-chat",
    }
    conditions |= {"stream": True, "seed": 0, "labels": {}, "load": load, "workload": {}, "sampling": {}}
    return {
        "run_id": "r1",
        "valid": True,
        "invalid_reasons": [],
        "warnings": [],
        "conditions": conditions | {"started_at": "now"},
        "summary": {},
        "server_metrics": {"engine": "vllm", "series": series},
    }


def records() -> list[RequestRecord]:
    out = []
    for i in range(5):
        r = RequestRecord(f"r{i}", sent_ns=(1000 + 100 * i) * MS)
        r.first_token_ns = r.sent_ns + (50 + 10 * i) * MS
        out.append(r)
    return out


GPU = {
    "source": "given",
    "scrapes": 12,
    "errors": 2,
    "dropped_readings": 0,
    "gpus": [{"gpu": "0", "model": "NVIDIA H100 80GB HBM3"}, {"gpu": "1", "model": "NVIDIA H100 80GB HBM3"}],
    "series": {"mean": {"util_pct": [[0.0, 20.0], [1.0, 80.0]]}, "per_gpu": {}},
    "steady": {
        "window_s": [0.5, 9.5],
        "util_pct": {"mean": 81.5, "ci95": [77.0, 86.0], "n": 9, "per_gpu": {"n1/0": 78.0, "n1/1": 85.0}},
        "power_w": {"mean": 540.0, "ci95": [500.0, 580.0], "n": 9, "per_gpu": {"n1/0": 520.0, "n1/1": 560.0}},
    },
}


def _with_gpu() -> dict:
    doc = result({"waiting": [[0.0, 0], [1.0, 2]]})
    doc["gpu_metrics"] = copy.deepcopy(GPU)
    return doc


def test_the_steady_window_in_sentences_and_a_table_per_gpu():
    doc = _with_gpu()
    lines = gpu_lines(doc)
    assert lines[0] == (
        "2 GPUs (NVIDIA H100 80GB HBM3) from given: utilisation 82 (95 % 77-86) %, "
        "power 540 (95 % 500-580) W (mean over GPUs in the steady window)"
    )
    assert lines[1] == "GPU reads: 2 of 12 reads failed"
    headers, rows = gpu_table(doc)
    assert headers == ["GPU", "util %", "power W"]
    assert rows == [["n1/0", 78.0, 520.0], ["n1/1", 85.0, 560.0], ["mean over GPUs", 81.5, 540.0]]
    assert gpu_lines(result({})) == [] and gpu_table(result({})) is None


def test_utilisation_is_drawn_beside_the_queue_even_without_engine_series():
    fig = F.leading_indicators(F.Step("run", _with_gpu(), records()))
    traces = {t.name: list(t.y) for t in fig.data}
    assert traces["GPU utilisation % (mean over GPUs)"] == [20.0, 80.0]
    gpu_only = result({})
    gpu_only["gpu_metrics"] = copy.deepcopy(GPU)
    assert F.leading_indicators(F.Step("run", gpu_only, records())) is not None


def test_the_html_report_of_a_sim_run_has_its_gpu_section():
    async def go():
        async with SimServer(port=0) as srv:
            cfg = bench_config(
                srv.url, model=None, concurrency=4, requests=24, input_len="64", output_len="16"
            )
            return await BenchRun(cfg).run()

    run = asyncio.run(go())
    doc = run.to_dict()
    page = render_html(doc, F.make_steps([doc], [run.records]))
    assert "<h2>GPUs (steady window)</h2>" in page and "mean over GPUs" in page
    assert "GPU utilisation % (mean over GPUs)" in page
