"""report --traces: the run's TTFT P95+ requests joined with their spans from a trace file, and the
HTML report's section that shows where their time went (a bar of hops per request, the median
share of each hop, how many had no trace). Hand-made records and spans: no servers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tokenpace.adapters.report import figures as F
from tokenpace.adapters.report.html import render_html
from tokenpace.adapters.report.tail_section import tail_figure, tail_shares_table
from tokenpace.app.reports.tail_report import trace_tail_of_run
from tokenpace.core.analysis.diagnosis.tail_hops import MAX_TAIL_SHOWN, TTFT_HOPS
from tokenpace.core.metrics import summarize
from tokenpace.core.record import RequestRecord

MS = 1_000_000
T0 = 1_700_000_000_000_000_000  # the spans' Unix ns
UNSAMPLED, MISSING = "r97", "r98"  # two of the five P95+ requests have no trace in the file


def _records(n: int = 100) -> list[RequestRecord]:
    out = []
    for i in range(1, n + 1):  # TTFT i ms: the P95 is 95.05 ms, so r96..r100 are the tail
        r = RequestRecord(f"r{i}", sent_ns=i * 1000 * MS, trace_id=f"{i:032x}", span_id=f"{i:016x}")
        r.first_token_ns = r.sent_ns + i * MS
        r.token_ns = [r.first_token_ns, r.first_token_ns + 5 * MS]
        r.end_ns = r.token_ns[-1]
        r.trace_sampled = r.request_id != UNSAMPLED
        out.append(r)
    return out


def _spans(rec: RequestRecord, gateway: bool) -> list[dict[str, object]]:
    """A client span, a gateway span (optional) and the engine's: 1 ms each way, queue a quarter."""
    ttft = (rec.first_token_ns or 0) - rec.sent_ns
    start, tid = T0 + rec.sent_ns, rec.trace_id
    client: dict[str, object] = {
        "trace_id": tid, "span_id": rec.span_id, "parent_id": None, "name": "chat m", "kind": "client",
        "service": "tokenpace-client", "start_ns": start, "end_ns": start + ttft + 5 * MS,
        "events": [{"name": "gen_ai.first_token", "time_ns": start + ttft}],
    }  # fmt: skip
    spans: list[dict[str, object]] = [client]
    parent, hop = rec.span_id, 1 * MS
    if gateway:
        first = [{"name": "gen_ai.first_token", "time_ns": start + ttft - hop}]
        gw = {**client, "span_id": "ab" * 8, "parent_id": rec.span_id, "kind": "server", "service": "gw",
              "start_ns": start + hop, "events": first}  # fmt: skip
        spans.append(gw)
        parent, start = "ab" * 8, start + hop
    engine_ttft = ttft - 2 * hop - (2 * hop if gateway else 0)
    attrs = {"gen_ai.latency.time_to_first_token": engine_ttft / 1e9,
             "gen_ai.latency.time_in_queue": engine_ttft / 4 / 1e9,
             "gen_ai.latency.time_in_model_prefill": engine_ttft * 3 / 4 / 1e9,
             "gen_ai.latency.time_in_model_decode": 0.005}  # fmt: skip
    spans.append({"trace_id": tid, "span_id": "cd" * 8, "parent_id": parent, "name": "llm_request",
                  "kind": "server", "service": "sim", "start_ns": start + hop,
                  "end_ns": start + hop + engine_ttft + 5 * MS, "attributes": attrs})  # fmt: skip
    return spans


def _trace_file(path: Path, records: list[RequestRecord], gateway: bool = True) -> Path:
    with path.open("w") as f:
        for rec in records:
            if rec.trace_sampled and rec.request_id != MISSING:
                for span in _spans(rec, gateway):
                    f.write(json.dumps(span) + "\n")
    return path


def test_the_tail_is_the_requests_at_or_above_p95_each_with_its_hops_or_counted(tmp_path: Path) -> None:
    records = _records()
    tail = trace_tail_of_run(records, _trace_file(tmp_path / "t.jsonl", records))
    assert tail.p95_ms == pytest.approx(95.05) and tail.above == 5 and tail.file_has_run
    assert [r.request_id for r in tail.rows] == ["r100", "r99", "r98", "r97", "r96"]  # slowest first
    assert (tail.unsampled, tail.missing) == (1, 1)
    assert [r.request_id for r in tail.explained] == ["r100", "r99", "r96"]
    h = tail.explained[0].hops
    assert h is not None and h.client_gateway_ms == pytest.approx(2.0) and h.queue_ms == pytest.approx(24.0)
    table = dict((row[0], row[1]) for row in tail_shares_table(tail)[1])
    assert list(table)[:5] == [label for _, label in TTFT_HOPS]
    assert sum(v for v in table.values() if v is not None) == pytest.approx(1.0, abs=0.01)  # shares of TTFT


def test_at_most_the_fifty_slowest_are_drawn_and_the_rest_counted(tmp_path: Path) -> None:
    records = _records(2000)  # 100 requests at or above the P95
    tail = trace_tail_of_run(records, _trace_file(tmp_path / "t.jsonl", records[-150:], gateway=False))
    assert tail.above == 100 and len(tail.rows) == MAX_TAIL_SHOWN
    fig = tail_figure(tail)
    assert fig is not None and {t.name for t in fig.data} == {
        "gateway and trip to the engine", "engine queue", "engine prefill", "return of the first token",
        "engine decode (after TTFT)",
    }  # no gateway on the path: no client-gateway hop  # fmt: skip
    assert all(len(t.y) == MAX_TAIL_SHOWN for t in fig.data)


def _page(records: list[RequestRecord], tail: object = None) -> str:
    conditions = {"model": "m", "endpoint": "http://127.0.0.1:1/v1", "started_at": "now", "labels": {},
                  "load": {"mode": "closed_loop", "concurrency": 1}}  # fmt: skip
    doc = {"run_id": "r", "valid": True, "summary": summarize(records).to_dict(), "conditions": conditions}
    return render_html(doc, F.make_steps([doc], [records]), None, tail)  # type: ignore[arg-type]


def test_the_report_shows_the_section_only_with_traces(tmp_path: Path) -> None:
    records = _records()
    page = _page(records, (trace_tail_of_run(records, _trace_file(tmp_path / "t.jsonl", records)), "t.jsonl"))
    section = page[page.index('id="tail-hops"') :]
    assert "TTFT P95 95.0 ms: 5 request(s) at or above it." in section
    assert "2 of these 5 had no trace: 1 not sampled (or not traced), 1 not whole in t.jsonl" in section
    assert all(label in section for _, label in TTFT_HOPS)
    assert "r100 (100.0 ms)" in section and "r97 (" not in section  # bars: the explained only
    assert 'id="tail-hops"' not in _page(records)


def test_a_file_without_the_runs_traces_and_an_untraced_run_say_so(tmp_path: Path) -> None:
    records = _records()
    other = _trace_file(
        tmp_path / "other.jsonl", [RequestRecord("x", sent_ns=MS, trace_id="f" * 32, span_id="e" * 16)]
    )
    tail = trace_tail_of_run(records, other)
    assert not tail.file_has_run and tail.missing == 4 and not tail.explained
    page = _page(records, (tail, "other.jsonl"))
    assert "other.jsonl holds none of this run&#x27;s trace ids" in page
    for r in records:
        r.trace_id = None
    assert "This run sent no trace context" in _page(records, (trace_tail_of_run(records, other), "o"))


def test_a_bad_trace_file_is_one_clear_error(tmp_path: Path) -> None:
    (tmp_path / "bad.jsonl").write_text("{not json\n")
    with pytest.raises(ValueError, match=r"bad.jsonl:1: not an OTLP JSON or span line"):
        trace_tail_of_run(_records(), tmp_path / "bad.jsonl")
    with pytest.raises(ValueError, match=r"absent.jsonl: no such file"):
        trace_tail_of_run(_records(), tmp_path / "absent.jsonl")


def test_runs_show_slowest_follows_sampled_requests_only() -> None:
    from tokenpace.app.reports.trace_tail import slowest_traced

    slow = slowest_traced(_records(), 3)
    assert [r.request_id for r in slow] == ["r100", "r99", "r98"]  # r97 was not sampled: no spans
    assert [r.request_id for r in slowest_traced(_records(), 4)][-1] == "r96"
