"""docs/gateway.md's tracing commands, run as written (ports and the collector's URL replaced): a
bench run through the gateway in front of the simulator, all three exporting to one real OTLP/HTTP
receiver, yields one trace per request with the client's, the gateway's and the engine's spans,
linked parent to child (the engine's parent the gateway's upstream call, one of the gateway's hop
spans), with consistent timing; and ``runs show --slowest --traces`` explains the
slowest requests hop by hop."""

from __future__ import annotations

import re
import shlex
import time
from pathlib import Path
from typing import Any

import pytest

from app.conftest import TRACING, TracedStack, doc_commands
from tokenpace.app.baseline.store_ops import open_store
from tokenpace.core.analysis.diagnosis.hops import Span, by_trace, hops, spans_from_json
from tokenpace.gateway.observability.hop_spans import CHILD_SPANS, UPSTREAM_SPAN
from tokenpace.gateway.observability.prom import TTFT
from tokenpace.testing.procs import run_cli

N = 10
# The sim writes a step's tokens centred on the step's model end time (its first_token_t), so a
# token can leave up to half a write burst (microseconds) before the time the engine reports.
ORDER_SLACK_MS = 1.0
# Each process maps its monotonic clock to Unix time once, at its start; a wall clock being slewed
# (0.5 % on some VMs) moves those mappings apart by as much as it moved during the run: added.
CLOCK_SLACK_NS = 5_000_000
PER_REQUEST = 1 + (1 + len(CHILD_SPANS)) + 4  # client; gateway and its hops; engine and 3 phases


def _wall_minus_monotonic_ns() -> int:
    return time.time_ns() - time.perf_counter_ns()


def _inside(child: Span, parent: Span, slack_ns: int) -> bool:
    return child.start_ns >= parent.start_ns - slack_ns and child.end_ns <= parent.end_ns + slack_ns


def test_one_trace_per_request_spans_client_gateway_and_engine(traced_stack: TracedStack) -> None:
    tmp_path, env, rx = traced_stack.tmp_path, traced_stack.env, traced_stack.rx
    wall_before = _wall_minus_monotonic_ns()
    _, _, bench_line, show_line = doc_commands(TRACING)
    metrics = traced_stack.bench(bench_line)
    raw = rx.wait_for(30, until=lambda s: len(s) >= N * PER_REQUEST)
    rx.write_jsonl(tmp_path / "traces.jsonl")
    slack = CLOCK_SLACK_NS + abs(_wall_minus_monotonic_ns() - wall_before)
    store = open_store(env["TOKENPACE_STORE"], existing=True)
    run = store.resolve("trial=traced")
    records = [r for r in store.load_records(run.id) if not r.warmup]
    assert len(records) == N and len({r.trace_id for r in records}) == N
    traces = by_trace(s for d in raw for s in spans_from_json(d))
    assert len(raw) == N * PER_REQUEST and set(traces) == {
        r.trace_id for r in records
    }  # nothing else, nothing lost
    for rec in records:
        trace = traces[rec.trace_id or ""]
        by_service: dict[str, list[Span]] = {}
        for s in trace:
            by_service.setdefault(s.service, []).append(s)
        (client,) = by_service["tokenpace-client"]
        gateway_spans = {s.name: s for s in by_service["tokenpace-gateway"]}
        (gateway,) = [s for s in gateway_spans.values() if s.kind == "server"]
        assert sorted(gateway_spans) == sorted([gateway.name, *CHILD_SPANS])
        engine_spans = {s.name: s for s in by_service["tokenpace-sim"]}
        assert sorted(engine_spans) == ["decode", "llm_request", "prefill", "queue"]
        engine = engine_spans["llm_request"]
        # parent links: client (root) -> gateway -> its upstream call -> llm_request -> its phases
        assert (client.kind, client.parent_id, client.span_id) == ("client", None, rec.span_id)
        assert (gateway.kind, gateway.parent_id) == ("server", client.span_id)
        call = gateway_spans[UPSTREAM_SPAN]
        assert (call.kind, call.parent_id) == ("client", gateway.span_id)
        assert (engine.kind, engine.parent_id) == ("server", call.span_id)
        for hop in gateway_spans.values():  # the gateway's hops, each inside its span
            assert hop.start_ns >= gateway.start_ns and hop.end_ns <= gateway.end_ns, hop.name
        phases = [engine_spans[n] for n in ("queue", "prefill", "decode")]
        assert all(p.parent_id == engine.span_id for p in phases)
        assert phases[0].start_ns == engine.start_ns and phases[-1].end_ns == engine.end_ns
        assert phases[0].end_ns == phases[1].start_ns and phases[1].end_ns == phases[2].start_ns
        assert _inside(gateway, client, slack) and _inside(engine, gateway, slack)
        # TTFT shrinks hop by hop: client >= gateway >= engine
        client_ttft = ((rec.first_token_ns or 0) - rec.sent_ns) / 1e6
        gateway_ttft = ((gateway.event_ns("gen_ai.first_token") or 0) - gateway.start_ns) / 1e6
        engine_ttft = float(engine.attributes["gen_ai.latency.time_to_first_token"]) * 1e3
        assert client_ttft >= gateway_ttft - ORDER_SLACK_MS and gateway_ttft >= engine_ttft - ORDER_SLACK_MS
        assert engine.attributes["gen_ai.usage.completion_tokens"] == rec.output_tokens
        # the hops add up to the client's TTFT (the client span's own, from its event)
        h = hops(trace)
        assert h is not None and h.client_gateway_ms is not None
        # the gateway's own part of `to engine` (one clock); the rest crosses to the engine's clock
        assert h.gateway_ms is not None and 0 <= h.gateway_ms <= h.to_engine_ms + slack / 1e6
        parts = h.client_gateway_ms + h.to_engine_ms + h.queue_ms + h.prefill_ms + h.from_engine_ms
        assert parts == pytest.approx(h.client_ttft_ms, abs=1e-3)
        assert h.client_ttft_ms == pytest.approx(client_ttft, abs=1e-3)
    # the gateway's TTFT histogram links its buckets to traces: OpenMetrics exemplars
    exemplars = re.findall(
        rf'^{TTFT}_bucket{{.*}} \d+(?:\.\d+)? # {{trace_id="([0-9a-f]{{32}})"}}', metrics, re.M
    )
    assert exemplars and set(exemplars) <= {r.trace_id for r in records}, metrics
    _shows_the_slowest_hop_by_hop(tmp_path, show_line, env, records)


def _shows_the_slowest_hop_by_hop(tmp_path: Path, line: str, env: dict[str, str], records: list[Any]) -> None:
    shown = run_cli(*shlex.split(line)[1:], env=env, cwd=str(tmp_path))
    assert shown.returncode == 0, shown.stderr
    slowest = sorted(records, key=lambda r: r.first_token_ns - r.sent_ns, reverse=True)[:3]
    rows = [ln for ln in shown.stdout.splitlines() if re.search(r"[0-9a-f]{16}", ln)]
    assert len(rows) == 3, shown.stdout
    for row, rec in zip(rows, slowest, strict=True):  # slowest first, each with all its hops
        assert rec.trace_id[:16] in row and "-" not in row.split(rec.trace_id[:16])[1].split(), row
    assert "without a whole trace" not in shown.stdout
    # bad input: one line on stderr, exit 2, never a traceback
    (tmp_path / "bad.jsonl").write_text('{"resourceSpans": [{"scopeSpans": [{"spans": [{}]}]}]}\n')
    argv = shlex.split(line)[1:]
    for args, says in (
        (argv[: argv.index("--traces")], "--slowest N and --traces FILE go together"),
        ([*argv[:-1], "bad.jsonl"], "bad.jsonl:1: not an OTLP JSON or span line"),
        ([*argv[:-1], "absent.jsonl"], "absent.jsonl"),
    ):
        bad = run_cli(*args, env=env, cwd=str(tmp_path))
        assert bad.returncode == 2 and says in bad.stderr and len(bad.stderr.splitlines()) == 1, bad.stderr
