"""docs/gateway.md's sampled tracing and report commands, run as written (ports and the collector's
URL replaced): ``bench --otlp-sample`` through the gateway in front of the simulator, all three
exporting to one real OTLP/HTTP receiver. The sampled requests are the seed's (the same set the
hash chooses), each with its client, gateway and engine spans; the unsampled ones keep a trace id
and are exported by nobody. ``report --traces`` then shows the P95+ requests hop by hop, counting
those without a trace. Bad sampling and report flags: one line, exit 2."""

from __future__ import annotations

import shlex
from pathlib import Path

import numpy as np

from app.conftest import TracedStack, doc_commands
from tokenpace.app.baseline.store_ops import open_store
from tokenpace.core.analysis.diagnosis.hops import by_trace, spans_from_json
from tokenpace.core.analysis.diagnosis.tail_hops import TTFT_HOPS
from tokenpace.core.record import RequestRecord
from tokenpace.core.trace_sample import trace_sampled
from tokenpace.testing.procs import run_cli

SPANS_PER_TRACE = 12  # client 1 + gateway 7 + engine 4
SAMPLED = "**A sampled share, and the tail in the HTML report.**"  # its block: the bench, the report


def _tail(records: list[RequestRecord]) -> list[RequestRecord]:
    ttft = {r.request_id: ((r.first_token_ns or 0) - r.sent_ns) / 1e6 for r in records}
    p95 = float(np.percentile(list(ttft.values()), 95))
    return [r for r in records if ttft[r.request_id] >= p95]


def test_sampled_requests_are_traced_by_every_hop_and_the_rest_by_none(traced_stack: TracedStack) -> None:
    tmp_path, env, rx = traced_stack.tmp_path, traced_stack.env, traced_stack.rx
    bench_line, report_line = doc_commands(SAMPLED)
    traced_stack.bench(bench_line)
    store = open_store(env["TOKENPACE_STORE"], existing=True)
    records = [r for r in store.load_records(store.resolve("trial=sampled").id) if not r.warmup]
    sampled = {r.trace_id for r in records if r.trace_sampled}
    # client 1, gateway 7 (its span, admission, route, upstream, connect, upstream wait, relay),
    # engine 4 (llm_request, queue, prefill, decode)
    raw = rx.wait_for(30, until=lambda s: len(s) >= len(sampled) * SPANS_PER_TRACE)
    rx.write_jsonl(tmp_path / "sampled-traces.jsonl")
    assert len(records) == 100 and all(r.status.value == "ok" for r in records)
    assert {r.index for r in records if r.trace_sampled} == {
        i for i in range(100) if trace_sampled(0, i, 0.5)
    }
    assert len({r.trace_id for r in records}) == 100  # the unsampled keep their ids too
    traces = by_trace(s for d in raw for s in spans_from_json(d))
    assert set(traces) == sampled and len(raw) == len(sampled) * SPANS_PER_TRACE  # no unsampled one
    for trace in traces.values():
        services = sorted(s.service for s in trace)
        assert services == ["tokenpace-client", *["tokenpace-gateway"] * 7, *["tokenpace-sim"] * 4], services
    _report_shows_the_tail(tmp_path, report_line, env, records)


def _report_shows_the_tail(
    tmp_path: Path, line: str, env: dict[str, str], records: list[RequestRecord]
) -> None:
    shown = run_cli(*shlex.split(line)[1:], env=env, cwd=str(tmp_path))
    assert shown.returncode == 0 and "html: sampled.html" in shown.stdout, shown.stderr
    section = (tmp_path / "sampled.html").read_text().split('id="tail-hops"', 1)[1]
    tail = _tail(records)
    traced = [r for r in tail if r.trace_sampled]
    assert f"{len(tail)} request(s) at or above it." in section
    assert (
        f"{len(tail) - len(traced)} of these {len(tail)} had no trace: {len(tail) - len(traced)} not"
        in section
    )
    drawn = all(f"{r.request_id} (" in section for r in traced)
    assert drawn and not any(f"{r.request_id} (" in section for r in tail if not r.trace_sampled)
    assert all(label in section for _, label in TTFT_HOPS) == bool(traced)
    plain = run_cli("report", "sampled.json", "--html", "plain.html", env=env, cwd=str(tmp_path))
    assert plain.returncode == 0 and 'id="tail-hops"' not in (tmp_path / "plain.html").read_text()
    for args, says in (
        (["report", "sampled.json", "--traces", "sampled-traces.jsonl"], "--traces adds a section to"),
        (["bench", "-n", "1", "--otlp-sample", "0.5"], "--otlp-sample needs --otlp-endpoint"),
        (["bench", "-n", "1", "--otlp-endpoint", "http://127.0.0.1:1/v1/traces", "--otlp-sample", "1.5"],
         "--otlp-sample must be a share in (0, 1], not 1.5"),
    ):  # fmt: skip
        bad = run_cli(*args, env=env, cwd=str(tmp_path))
        assert bad.returncode == 2 and says in bad.stderr and len(bad.stderr.splitlines()) == 1, bad.stderr


def test_the_python_api_exports_client_spans_of_the_sampled_requests_only(traced_stack: TracedStack) -> None:
    from tokenpace.app.api import run_bench
    from tokenpace.app.run.bench_config import BenchConfig
    from tokenpace.core.workload.lengths import parse_length

    rx = traced_stack.rx  # its receiver only: the simulated engine is started for the run, exporting nothing
    cfg = BenchConfig(url="", concurrency=4, requests=30, seed=3, output_len=parse_length("4"))
    cfg.otlp_endpoint, cfg.otlp_sample = rx.url, 0.3
    result = run_bench(cfg)
    sampled = {r.trace_id for r in result.records if r.trace_sampled}
    spans = rx.wait_for(30, until=lambda s: len(s) >= len(sampled))
    assert {r.index for r in result.records if r.trace_sampled} == {
        i for i in range(30) if trace_sampled(3, i, 0.3)
    }
    assert sampled and len(spans) == len(sampled)
    assert {s["trace_id"] for s in spans} == sampled and {s["service"] for s in spans} == {"tokenpace-client"}
