"""The simulated engine's hop of each request's trace (``tokenpace sim --otlp-endpoint URL``).

In the shape of vLLM's tracing (``--otlp-traces-endpoint``): per finished request one ``llm_request``
SERVER span, child of the incoming ``traceparent``'s span (the gateway's or the client's; a root when
none came), with vLLM's GenAI attributes (``gen_ai.request.id``, ``gen_ai.latency.*`` in seconds), and
three child spans ``queue``, ``prefill``, ``decode`` from the engine's own times.

The streaming loop only hands finished requests over (``finished``, once per request, never per
token); the spans are built in a later event-loop callback and the SDK's batch processor (bounded at
2,048 spans, past which it drops) exports them from its own thread. Aborted requests get no span, as
in vLLM, and so do requests whose ``traceparent`` says they are not sampled (flag 00), as vLLM's
parent-based sampler does.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from tokenpace.adapters.otlp import INTERNAL, SERVER, SpanExport, SpanOut
from tokenpace.sim.model.request import SimRequest
from tokenpace.wire import tracecontext as tc

SERVICE = "tokenpace-sim"
REQUEST_SPAN = "llm_request"


class EngineTraces:
    def __init__(self, endpoint: str | None, model: str, exporter: Any = None) -> None:
        self.export = SpanExport(endpoint, SERVICE, exporter)
        self.model = model
        self.offset_ns = time.time_ns() - time.monotonic_ns()  # engine clock (monotonic) -> Unix

    def finished(self, req: SimRequest) -> None:
        """Called by the streaming loop on a finish: defers the span building past this step."""
        asyncio.get_running_loop().call_soon(self.export_request, req)

    def export_request(self, req: SimRequest) -> None:
        for span in engine_spans(req, getattr(req.sink, "traceparent", None), self.model, self.offset_ns):
            self.export.add(span)

    def close(self) -> None:
        """Export what is queued, then stop (blocking: call from a thread in an event loop)."""
        self.export.close()


def engine_spans(req: SimRequest, traceparent: str | None, model: str, offset_ns: int) -> list[SpanOut]:
    """The ``llm_request`` span and its ``queue``/``prefill``/``decode`` children of one finished
    request (times are monotonic seconds; ``offset_ns`` turns them into Unix ns)."""
    if req.finish_t is None or req.first_token_t is None or not tc.is_sampled(traceparent):
        return []  # unfinished, or the caller left the request unsampled (traceparent flag 00)
    arrival, first, finish = req.arrival_t, req.first_token_t, req.finish_t
    # A step's model start can precede an arrival that came while the loop caught up: such a request
    # did not queue, so its queue phase is empty rather than negative.
    scheduled = max(req.scheduled_t if req.scheduled_t is not None else arrival, arrival)
    incoming = tc.parse_traceparent(traceparent)
    trace_id, parent = incoming or (tc.new_trace_id(), None)
    span_id = tc.new_span_id()

    def ns(t: float) -> int:
        return round(t * 1e9) + offset_ns

    attrs: dict[str, Any] = {
        "gen_ai.request.id": req.rid,
        "gen_ai.response.model": model,
        "gen_ai.request.max_tokens": req.max_tokens,
        "gen_ai.usage.prompt_tokens": req.prompt_len,
        "gen_ai.usage.completion_tokens": req.generated,
        "gen_ai.latency.time_in_queue": scheduled - arrival,
        "gen_ai.latency.time_to_first_token": first - arrival,
        "gen_ai.latency.e2e": finish - arrival,
        "gen_ai.latency.time_in_model_prefill": first - scheduled,
        "gen_ai.latency.time_in_model_decode": finish - first,
        "gen_ai.response.finish_reasons": (req.finish_reason,),
    }
    root = SpanOut(REQUEST_SPAN, trace_id, span_id, parent, ns(arrival), ns(finish), SERVER, attrs)
    phases = (("queue", arrival, scheduled), ("prefill", scheduled, first), ("decode", first, finish))
    children = [SpanOut(n, trace_id, tc.new_span_id(), span_id, ns(a), ns(b), INTERNAL) for n, a, b in phases]
    return [root, *children]
