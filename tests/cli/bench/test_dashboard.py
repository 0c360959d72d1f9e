"""The words beside the numbers: no TTFT decomposition without streaming, "template tokens aside"
only when something was set aside, a 404 hint that names /v1, open-loop goodput from the schedule."""

from __future__ import annotations

import pytest
from rich.console import Console

from tokenpace.app.run.run_info import not_found_hint
from tokenpace.app.run.workloads import warnings as workload_warnings
from tokenpace.cli.bench.dashboard import _decomposition, _template_note, _throughput
from tokenpace.core.analysis.diagnosis.engine_metrics import analyse
from tokenpace.core.record import RequestRecord, Status

MS = 1_000_000


def scrape(t_ms: int, count: int, ttft_s: float, e2e_s: float) -> dict:
    samples = {
        "vllm:time_to_first_token_seconds_count": count,
        "vllm:time_to_first_token_seconds_sum": ttft_s,
        'vllm:time_to_first_token_seconds_bucket{le="+Inf"}': count,
        "vllm:e2e_request_latency_seconds_count": count,
        "vllm:e2e_request_latency_seconds_sum": e2e_s,
        'vllm:e2e_request_latency_seconds_bucket{le="+Inf"}': count,
    }
    return {"t_ns": t_ms * MS, "samples": samples}


def whole_responses() -> list[RequestRecord]:
    out = []
    for i in range(4):  # not streamed: the first token is the end of the response, 135 ms after the send
        r = RequestRecord(f"r{i}", sent_ns=(100 + i) * MS, status=Status.OK)
        r.first_token_ns = r.end_ns = r.sent_ns + 135 * MS
        out.append(r)
    return out


def test_no_stream_has_no_ttft_decomposition_and_never_calls_decode_network():
    scrapes = [scrape(0, 0, 0.0, 0.0), scrape(1000, 4, 4 * 0.013, 4 * 0.130)]
    streamed_view = analyse(scrapes, whole_responses(), 0)["decomposition"]
    assert streamed_view["network_and_client_ms"] == pytest.approx(122)  # what the old words called network
    dec = analyse(scrapes, whole_responses(), 0, streamed=False)["decomposition"]
    assert dec["streamed"] is False and "client_ttft_mean_ms" not in dec
    assert dec["client_e2e_mean_ms"] == pytest.approx(135) and dec["engine_e2e_mean_ms"] == pytest.approx(130)
    assert dec["network_and_client_ms"] == pytest.approx(5)  # E2E against E2E: decode is on both sides
    line = _decomposition(dec)
    assert line.startswith("no streaming: no TTFT decomposition (client TTFT is E2E, mean 135.0 ms)")
    assert "E2E = engine 130.0 + network and client 5.0 ms" in line
    no_e2e = dict(dec, engine_e2e_mean_ms=None, network_and_client_ms=None)
    assert "engine TTFT 13.0 ms, the rest is decode and network" in _decomposition(no_e2e)


def prompt_extra(overhead: int) -> dict:
    check = {"mismatch": True, "server_over_asked_without_template": 1.03,
             "template_overhead_tokens": overhead, "server_total": 3090, "asked_total": 3000,
             "compared": 10, "tolerance": 0.02}  # fmt: skip
    return {"prompt_tokens_check": check}


def test_template_tokens_are_said_aside_only_when_they_were():
    (none_aside,) = workload_warnings(prompt_extra(0))
    assert "set aside" not in none_aside and "not a chat template's constant few" in none_aside
    (aside,) = workload_warnings(prompt_extra(9))
    assert "with a chat template's 9 tokens a request set aside" in aside


def records_404(n: int, ok: int = 0) -> list[RequestRecord]:
    out = [RequestRecord(f"r{i}", sent_ns=MS, status=Status.HTTP_ERROR, http_status=404) for i in range(n)]
    return out + [RequestRecord(f"ok{i}", sent_ns=MS, status=Status.OK) for i in range(ok)]


def test_a_404_on_every_request_names_the_missing_v1():
    hint = not_found_hint("http://127.0.0.1:8000", "", records_404(5))
    assert hint == (
        "every request got HTTP 404: the URL http://127.0.0.1:8000 probably lacks /v1 "
        "(OpenAI-compatible servers serve http://127.0.0.1:8000/v1/...)"
    )
    assert "check the URL's path and the --model name" in (
        not_found_hint("http://h/v1", "/v1", records_404(5)) or ""
    )
    assert not_found_hint("http://h", "", records_404(5, ok=1)) is None  # something worked: not the path


def test_open_loop_goodput_line_says_its_clock():
    s = {"request_throughput": 5.0, "output_token_throughput": 50.0, "total_token_throughput": 500.0,
         "window_s": 10.0, "goodput": 1.0, "goodput_ratio": 0.2, "slo": {"ttft_ms": 500.0},
         "goodput_latency_from": "scheduled", "goodput_from_send": 5.0, "goodput_ratio_from_send": 1.0,
         "steady": {"request_throughput": 5.2, "window_s": 8.0, "excluded_ramp_up_s": 0.5,
                    "excluded_drain_s": 1.5, "short": False}}  # fmt: skip
    console = Console(record=True, width=300)
    console.print(_throughput(s))
    text = console.export_text()
    assert (
        "1.00 req/s met every SLO (ttft <= 500 ms): 20.0% of requests, latency from the scheduled time"
        in text
    )
    assert "(from the send: 5.00 req/s, 100.0%)" in text
    assert "steady state 5.20 req/s over 8.0 s (ramp-up 0.5 s and drain 1.5 s left out)" in text


def test_the_prefix_cache_hit_rate_that_compare_warns_about_is_on_the_dashboard():
    from tokenpace.cli.bench.dashboard import _server

    result = {
        "server_metrics": {"engine": "vllm", "scrapes": 12, "series": {}},
        "summary": {"server": {"prefix_hit_rate": 1.0}},
        "conditions": {"target": "http://127.0.0.1:8000/v1"},
    }
    text = _server(result)
    assert text is not None and "prefix-cache hit rate 100%: TTFT here is a warm-cache figure" in text.plain


def test_a_chat_templates_tokens_are_said_once_as_information():
    check = {"mismatch": False, "template_overhead_tokens": 14, "server_over_asked": 1.027}
    note = _template_note(check)
    assert "14 more per request" in note and "chat template" in note and "%" not in note
    assert workload_warnings({"prompt_tokens_check": check}) == []  # no warning besides
    assert _template_note({**check, "mismatch": True}) == ""
