"""The simulated engine honours the sampled flag of the incoming ``traceparent``, as vLLM's
parent-based sampler does: flag 00, no engine span; flag 01, its spans as usual."""

from __future__ import annotations

import pytest

from sim.endpoints.test_sim_otlp import _run

pytest.importorskip("opentelemetry.sdk")

TRACE, OTHER, PARENT = (
    "4bf92f3577b34da6a3ce929d0e0e4736",
    "5cf92f3577b34da6a3ce929d0e0e4737",
    "00f067aa0ba902b7",
)


def test_an_unsampled_request_gets_no_engine_span() -> None:
    spans = _run(
        [
            ({"traceparent": f"00-{TRACE}-{PARENT}-00"}, True),
            ({"traceparent": f"00-{OTHER}-{PARENT}-01"}, False),
        ]
    )
    assert {f"{s.context.trace_id:032x}" for s in spans} == {OTHER}
    assert sorted(s.name for s in spans) == ["decode", "llm_request", "prefill", "queue"]
