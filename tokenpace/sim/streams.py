"""Delivering tokens: turns the engine's per-step output into bytes on each client's connection.

Everything here runs on the per-token path, once per running request per engine step, so it does one
template concatenation and one transport write per request per step, and no allocation beyond that.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tokenpace.http1.server import ServerConnection
from tokenpace.sim.api import ChunkFormat, GenRequest
from tokenpace.sim.engine import SimRequest
from tokenpace.sim.metrics import SimMetrics
from tokenpace.sim.tokens import WORDS

_SPACED = tuple(" " + w for w in WORDS)
_DONE = b"data: [DONE]\n\n"


@dataclass(eq=False, slots=True)
class ResponseStream:
    conn: ServerConnection
    gen: GenRequest
    fmt: ChunkFormat
    headers: list[tuple[str, str]]
    cut_at: int = 0  # close the connection right after this many tokens (0: never)
    malformed_at: int = 0  # send a broken chunk just before this token (1-based; 0: never)
    last_t: float = 0.0  # when the previous token was written (model time), for ITL


def deliver(
    out: list[SimRequest], end: float, metrics: SimMetrics, abort: Callable[[SimRequest], None]
) -> None:
    """Write the tokens one engine step produced; `end` is the step's model end time."""
    n_words = len(_SPACED)
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
        data = s.fmt.token(_SPACED[(k - 1) % n_words])
        if k == s.malformed_at:
            data = s.fmt.malformed() + data
        if req.finished:
            data += s.fmt.finish(req.finish_reason)
            if s.gen.include_usage:
                data += s.fmt.usage(req.prompt_len, k)
            conn.end_stream(data + _DONE)
        elif k == s.cut_at:
            conn.write_chunk(data)
            abort(req)
            conn.close()  # FIN without the chunked terminator: the client sees a truncated stream
        else:
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
