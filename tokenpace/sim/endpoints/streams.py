"""Delivering tokens: turns the engine's per-step output into bytes on each client's connection.

Everything here runs on the per-token path, once per running request per engine step, so it does one
template concatenation and one transport write per request per step, and no allocation beyond that.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from tokenpace.sim.endpoints.api import GenRequest
from tokenpace.sim.endpoints.chunks import ANSWER, REASONING, TOOL, WireFormat
from tokenpace.sim.endpoints.metrics import SimMetrics
from tokenpace.sim.endpoints.tokens import WORDS
from tokenpace.sim.model.request import SimRequest

_SPACED = tuple(" " + w for w in WORDS)
_N_WORDS = len(_SPACED)


class Sink(Protocol):
    """Where a response's bytes go: an HTTP connection (chunked), or a realtime WebSocket session."""

    @property
    def closed(self) -> bool: ...

    on_lost: Callable[[], None] | None

    def start_stream(self, status: int, headers: list[tuple[str, str]]) -> None: ...

    def write_chunk(self, data: bytes) -> None: ...

    def end_stream(self, last: bytes = b"") -> None: ...

    def respond(self, status: int, body: bytes, headers: list[tuple[str, str]]) -> None: ...

    def close(self) -> None: ...


@dataclass(eq=False, slots=True)
class ResponseStream:
    conn: Sink
    gen: GenRequest
    fmt: WireFormat
    headers: list[tuple[str, str]]
    cut_at: int = 0  # close the connection right after this many tokens (0: never)
    malformed_at: int = 0  # send a broken chunk just before this token (1-based; 0: never)
    last_t: float = 0.0  # when the previous token was written (model time), for ITL
    chunk_from: int = 1  # first token (1-based) not yet written, when chunks hold several tokens
    plain: bool = False  # one answer token per chunk, the common case: delivered on the short path
    traceparent: str | None = None  # the request's W3C trace context, as it came (read after finish)

    def __post_init__(self) -> None:
        g = self.gen
        self.plain = g.reasoning == 0 and g.tool_name is None and g.per_chunk == 1

    def chunk_for(self, k: int, finished: bool) -> bytes:
        """The chunk to write after token k; b"" while a multi-token chunk is still filling."""
        gen = self.gen
        phase = REASONING if k <= gen.reasoning else (ANSWER if gen.tool_name is None else TOOL)
        if gen.per_chunk == 1:
            return self.fmt.chunk(_SPACED[(k - 1) % _N_WORDS], phase, finished, k)
        # A chunk never mixes reasoning and answer: the last reasoning token closes one.
        if not (finished or k == gen.reasoning or k - self.chunk_from + 1 >= gen.per_chunk):
            return b""
        words = "".join(_SPACED[i % len(_SPACED)] for i in range(self.chunk_from - 1, k))
        self.chunk_from = k + 1
        return self.fmt.chunk(words, phase, finished, k)


def deliver(
    out: list[SimRequest],
    end: float,
    metrics: SimMetrics,
    abort: Callable[[SimRequest], None],
    on_finish: Callable[[SimRequest], None] | None = None,
) -> None:
    """Write the tokens one engine step produced; `end` is the step's model end time. `on_finish`
    gets each finished request (once per request: the tracing hand-off)."""
    itl_observe = metrics.itl.observe
    tpot_observe = metrics.tpot.observe
    for req in out:
        s: ResponseStream = req.sink
        conn = s.conn
        k = req.generated  # 1-based index of the token just produced
        if k == 1:
            metrics.ttft.observe(end - req.arrival_t)
            metrics.prompt_tokens += req.prompt_len
        else:
            gap = end - s.last_t
            itl_observe(gap)
            tpot_observe(gap)
        s.last_t = end
        metrics.generation_tokens += 1
        if req.finished:
            _observe_finished(req, metrics)
            if on_finish is not None:
                on_finish(req)
        if conn.closed:
            continue
        if not s.gen.stream:
            if k == s.cut_at and not req.finished:
                abort(req)
                conn.close()  # the connection drops before any answer
            elif req.finished:
                body = s.fmt.full_response(k, req.prompt_len, req.finish_reason)
                if s.malformed_at:
                    body = body[: len(body) // 2]  # a 200 whose JSON is cut short
                conn.respond(200, body, s.headers)
            continue
        if s.plain:
            data = s.fmt.chunk(_SPACED[(k - 1) % _N_WORDS], ANSWER, req.finished, k)
        else:
            data = s.chunk_for(k, req.finished)
        if k == s.malformed_at:
            data = s.fmt.malformed() + data
        if req.finished:
            conn.end_stream(data + s.fmt.closing(req.finish_reason, req.prompt_len, k))
        elif k == s.cut_at:
            if data:
                conn.write_chunk(data)
            abort(req)
            conn.close()  # FIN without the chunked terminator: the client sees a truncated stream
        elif data:  # an empty chunk would end the chunked body
            conn.write_chunk(data)


def _observe_finished(req: SimRequest, m: SimMetrics) -> None:
    assert req.finish_t is not None and req.first_token_t is not None
    m.success[req.finish_reason] = m.success.get(req.finish_reason, 0) + 1
    m.e2e.observe(req.finish_t - req.arrival_t)
    sched = req.scheduled_t if req.scheduled_t is not None else req.arrival_t
    m.queue.observe(sched - req.arrival_t)
    m.prefill.observe(req.first_token_t - sched)
    m.decode.observe(req.finish_t - req.first_token_t)
    m.req_prompt.observe(req.prompt_len)
    m.req_gen.observe(req.generated)
