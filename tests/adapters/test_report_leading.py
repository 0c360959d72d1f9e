"""The HTML report draws the engine's queue and KV usage on the client's TTFT timeline."""

import json

from tokenpace.adapters.report import figures as F
from tokenpace.adapters.report.html import render_html
from tokenpace.core.record import RequestRecord

MS = 1_000_000


def result(series):
    return {
        "run_id": "r1",
        "valid": True,
        "invalid_reasons": [],
        "warnings": [],
        "conditions": json.loads(
            json.dumps(
                {
                    "model": "m",
                    "endpoint": "http://127.0.0.1:1/v1",
                    "target": "x",
                    "api": "openai-chat",
                    "stream": True,
                    "seed": 0,
                    "labels": {},
                    "load": {"mode": "closed_loop", "concurrency": 1, "warmup": 0},
                    "workload": {},
                    "sampling": {},
                    "started_at": "now",
                }
            )
        ),
        "summary": {},
        "server_metrics": {"engine": "vllm", "series": series},
    }


def records():
    out = []
    for i in range(5):
        r = RequestRecord(f"r{i}", sent_ns=(1000 + 100 * i) * MS)
        r.first_token_ns = r.sent_ns + (50 + 10 * i) * MS
        out.append(r)
    return out


def test_leading_indicators_figure_has_ttft_and_engine_series():
    step = F.Step(
        "run", result({"waiting": [[0.0, 0], [0.2, 3]], "kv_usage": [[0.0, 0.1], [0.2, 0.5]]}), records()
    )
    fig = F.leading_indicators(step)
    names = [t.name for t in fig.data]
    assert names == ["client TTFT", "waiting requests", "KV cache usage %"]
    assert list(fig.data[0].y) == [50, 60, 70, 80, 90]
    assert list(fig.data[2].y) == [10, 50]  # usage shown as a percentage
    assert fig.data[1].yaxis == "y2"


def test_no_server_metrics_no_figure():
    step = F.Step("run", result({}), records())
    assert F.leading_indicators(step) is None


def test_report_of_a_real_run_includes_it():
    import asyncio

    from tokenpace.app.bench.bench import BenchConfig, BenchRun
    from tokenpace.core.workload.lengths import parse_length
    from tokenpace.sim import SimServer

    async def go():
        async with SimServer(port=0) as srv:
            cfg = BenchConfig(
                url=srv.url,
                concurrency=4,
                requests=12,
                input_len=parse_length("256"),
                output_len=parse_length("8"),
                server_metrics_interval_s=0.1,
            )
            return await BenchRun(cfg).run()

    run = asyncio.run(go())
    doc = run.to_dict()
    page = render_html(doc, F.make_steps([doc], [run.records]))
    assert "Leading indicators" in page
