"""The simulator's engine spans (sim/endpoints/otlp.py), in the shape of vLLM's tracing: one llm_request
SERVER span per finished request continuing the incoming traceparent, with vLLM's GenAI attributes,
and queue/prefill/decode children; none for a request the client dropped."""

from __future__ import annotations

import asyncio
import contextlib

import aiohttp
import pytest

from tokenpace.sim.endpoints.otlp import EngineTraces
from tokenpace.sim.endpoints.server import SimServer

pytest.importorskip("opentelemetry.sdk")

TRACE, PARENT = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
CHAT = {"model": "m", "messages": [{"role": "user", "content": "one two three four"}], "max_tokens": 6}


def _run(requests: list[tuple[dict[str, str], bool]]) -> list:
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()

    async def main() -> None:
        srv = SimServer("llama-3.1-8b-h100")
        srv.traces = EngineTraces(None, srv.profile.served_model_name, exporter=exporter)
        async with srv, aiohttp.ClientSession() as s:
            for headers, stream in requests:
                body = {**CHAT, "stream": stream, "ignore_eos": True}
                async with s.post(srv.url + "/chat/completions", json=body, headers=headers) as r:
                    with contextlib.suppress(aiohttp.ClientPayloadError):  # a cut stream
                        await r.read()
            await asyncio.sleep(0.05)  # the spans are built in a callback after the step

    asyncio.run(asyncio.wait_for(main(), 30))
    return list(exporter.get_finished_spans())  # stop() flushed the batch


def test_a_finished_request_gets_vllms_llm_request_span_under_the_incoming_parent() -> None:
    spans = _run([({"traceparent": f"00-{TRACE}-{PARENT}-01"}, True)])
    by_name = {s.name: s for s in spans}
    assert sorted(by_name) == ["decode", "llm_request", "prefill", "queue"]
    root = by_name["llm_request"]
    assert f"{root.context.trace_id:032x}" == TRACE and f"{root.parent.span_id:016x}" == PARENT
    assert root.kind.name == "SERVER" and root.resource.attributes["service.name"] == "tokenpace-sim"
    a = root.attributes
    assert a["gen_ai.request.id"].startswith("sim-") and a["gen_ai.response.model"]
    assert (a["gen_ai.request.max_tokens"], a["gen_ai.usage.completion_tokens"]) == (6, 6)
    assert a["gen_ai.usage.prompt_tokens"] > 0
    queue, prefill, decode = (
        a[f"gen_ai.latency.{k}"] for k in ("time_in_queue", "time_in_model_prefill", "time_in_model_decode")
    )
    assert min(queue, prefill, decode) >= 0
    assert a["gen_ai.latency.time_to_first_token"] == pytest.approx(queue + prefill)
    assert a["gen_ai.latency.e2e"] == pytest.approx(queue + prefill + decode)
    for name in ("queue", "prefill", "decode"):
        child = by_name[name]
        assert (
            child.parent.span_id == root.context.span_id and child.context.trace_id == root.context.trace_id
        )
    assert by_name["queue"].start_time == root.start_time and by_name["decode"].end_time == root.end_time
    assert by_name["prefill"].end_time - by_name["prefill"].start_time == pytest.approx(prefill * 1e9, abs=2)


def test_without_traceparent_a_new_root_and_a_dropped_request_gets_no_span() -> None:
    spans = _run([({}, False), ({"x-sim-fault": "cut:2"}, True), ({"traceparent": "00-bad-01"}, False)])
    roots = [s for s in spans if s.name == "llm_request"]
    assert len(roots) == 2  # the cut request was aborted: no span, as in vLLM
    assert all(s.parent is None for s in roots)  # no (valid) incoming context: each starts a trace
    assert len({s.context.trace_id for s in roots}) == 2
