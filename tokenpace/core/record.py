"""The request record: one per request sent, offline or online, failed or not.

Every timestamp is ``time.perf_counter_ns()`` of the process that measured it (CLOCK_MONOTONIC on
Linux); only differences between them mean anything. A run carries one wall-clock anchor to place
them in calendar time.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from enum import Enum
from typing import Any


class Status(str, Enum):
    OK = "ok"
    HTTP_ERROR = "http_error"
    TIMEOUT = "timeout"
    CONNECT_ERROR = "connect_error"
    STREAM_INTERRUPTED = "stream_interrupted"
    PROTOCOL_ERROR = "protocol_error"
    CANCELLED = "cancelled"


# Statuses that count as a failure of the server or the network (cancelled is the user's doing).
FAILURE_STATUSES = frozenset(
    {
        Status.HTTP_ERROR,
        Status.TIMEOUT,
        Status.CONNECT_ERROR,
        Status.STREAM_INTERRUPTED,
        Status.PROTOCOL_ERROR,
    }
)


# Token timestamps kept per request: past it chunks are still counted (``output_tokens_counted``)
# and ``token_ns_dropped`` says how many timestamps were not kept. 8192 ints is about 300 KB held
# per request at worst; a stream flooding tiny events can no longer grow one request without bound.
TOKEN_TIMESTAMPS_KEPT = 8192


# A streamed chunk carries a token, a few with speculative decoding or batched deltas: a server's
# usage past this many per counted chunk, or past MAX_OUTPUT_TOKENS at all, is not believed (a
# broken or hostile server's 10^12 once made a headline of 1.4e15 tokens/s); the chunks count.
MAX_TOKENS_PER_CHUNK = 64
MAX_OUTPUT_TOKENS = 10_000_000


class TokenSource(str, Enum):
    SERVER = "server"  # the server's usage report
    CHUNKS = "chunks"  # counted: one token per token-carrying chunk
    NONE = "none"  # nothing to count (failed before any output)
    USAGE_IMPLAUSIBLE = "chunks_usage_implausible"  # counted: the server's usage was not believable


@dataclass(slots=True)
class RequestRecord:
    request_id: str
    index: int = 0  # position in the workload (0-based), warm-up included
    worker: int = 0
    warmup: bool = False
    labels: dict[str, str] = field(default_factory=dict)

    # --- timing (perf_counter_ns) ---
    scheduled_ns: int = 0  # when the schedule wanted it sent
    dispatched_ns: int = 0  # when the client's dispatcher released it (late => client lag)
    sent_ns: int = 0  # when the client started sending it (connection acquisition included)
    attempts: int = 1  # times the request was written (2: resent after a reused connection dropped it)
    first_sent_ns: int | None = None  # when a resent request was first sent (latencies use sent_ns)
    connect_ns: int | None = None  # time spent opening a new connection (None: reused one)
    dns_ns: int | None = None  # ... of which DNS lookup
    tcp_ns: int | None = None  # ... TCP connect
    tls_ns: int | None = None  # ... TLS handshake (None: plain HTTP)
    request_ns: int | None = None  # request bytes handed to the kernel
    headers_ns: int | None = None  # response headers received
    first_token_ns: int | None = None  # first chunk carrying generated output, any channel
    first_answer_ns: int | None = None  # first chunk carrying answer text or a tool call
    token_ns: list[int] = field(default_factory=list)  # token chunks, the first TOKEN_TIMESTAMPS_KEPT
    token_ns_dropped: int = 0  # token-carrying chunks past the cap: counted, their timestamps not kept
    chunk_tokens: list[int] | None = None  # tokens per chunk, only when the server says so
    end_ns: int | None = None  # stream finished, failed or was cancelled

    # --- tokens ---
    prompt_tokens_requested: int | None = None  # what the workload asked for
    prompt_tokens: int | None = None  # server-reported
    output_tokens_requested: int | None = None  # max_tokens sent
    output_tokens_server: int | None = None
    output_tokens_counted: int = 0  # token-carrying chunks (a chunk may carry several tokens)
    reasoning_chunks: int = 0  # token-carrying chunks that were reasoning, not answer

    # --- workload (issue 7): which session turn or shared prefix this request was ---
    session: int | None = None  # multi-turn session number
    turn: int | None = None  # turn index in its session (0 = first)
    prefix_id: int | None = None  # shared prefix the prompt started with
    prefix_cold: bool | None = None  # first request of the run to use that prefix
    # --- the prompt's shape, kept by the gateway so its records can be replayed (issue 27) ---
    prompt_chars: int | None = None  # characters of prompt text
    prefix_hashes: list[int] | None = None  # chained hashes of its 2048-character blocks (prompt_shape)
    prompt_text: str | None = None  # the prompt itself: only when the operator opted in (--keep-prompts)

    # --- W3C trace context (issue 29): this hop's span of the request's trace ---
    trace_id: str | None = None  # 32 hex digits, shared by every hop of the request
    span_id: str | None = None  # this hop's span (sent on as the parent in ``traceparent``)
    parent_span_id: str | None = None  # the span of the hop before (the client's, at the gateway)
    # W3C ``sampled`` flag: False when the trace id went out with flag 00 (``--otlp-sample``, or an
    # unsampled incoming trace at the gateway) and no hop exported a span of it
    trace_sampled: bool = True

    # --- the gateway (issue 48): the load its upstream carried when this request was sent to it ---
    # requests already in flight on the same upstream in this gateway process, this one not counted
    # (None: not recorded, e.g. a client's record or a gateway older than the field)
    upstream_inflight: int | None = None

    # --- outcome ---
    status: Status = Status.OK
    http_status: int | None = None
    error: str | None = None
    finish_reason: str | None = None

    # The client's self-check.
    # The most a client stall could have added to this request's measured times (ms); None: no
    # timestamp of it was taken during a stall (core/analysis/diagnosis/client_stalls.py).
    client_stall_ms: float | None = None

    def note_token_chunk(self, now: int, answer: bool) -> None:
        """A chunk carrying generated output arrived at ``now``: answer text/tool call, or reasoning."""
        if len(self.token_ns) < TOKEN_TIMESTAMPS_KEPT:
            self.token_ns.append(now)
        else:
            self.token_ns_dropped += 1
        self.output_tokens_counted += 1
        if self.first_token_ns is None:
            self.first_token_ns = now
        if answer:
            if self.first_answer_ns is None:
                self.first_answer_ns = now
        else:
            self.reasoning_chunks += 1

    @property
    def usage_implausible(self) -> bool:
        """The server reported more output tokens than it could have sent (see MAX_TOKENS_PER_CHUNK)."""
        server = self.output_tokens_server
        if server is None:
            return False
        if server < 0 or server > MAX_OUTPUT_TOKENS:
            return True
        return bool(self.output_tokens_counted) and server > self.output_tokens_counted * MAX_TOKENS_PER_CHUNK

    @property
    def output_tokens(self) -> int:
        """Best output-token count: the server's when it reported a plausible one, else counted chunks."""
        if self.output_tokens_server is not None and not self.usage_implausible:
            return self.output_tokens_server
        return self.output_tokens_counted

    @property
    def output_tokens_source(self) -> TokenSource:
        if self.output_tokens_server is not None:
            return TokenSource.USAGE_IMPLAUSIBLE if self.usage_implausible else TokenSource.SERVER
        if self.output_tokens_counted:
            return TokenSource.CHUNKS
        return TokenSource.NONE

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["status"] = self.status.value
        out["output_tokens"] = self.output_tokens
        out["output_tokens_source"] = self.output_tokens_source.value
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RequestRecord:
        # Keyword names as the class's own string objects: a decoder's fresh keys would be matched
        # by comparing strings, not identity, the most of a stored record's decoding time. A None
        # where the default is None is left to the default: fewer keywords to match.
        kwargs = {
            _FIELD_NAMES[k]: v
            for k, v in data.items()
            if k in _FIELD_NAMES and (v is not None or k not in _NONE_BY_DEFAULT)
        }
        kwargs["status"] = Status(kwargs.get("status", "ok"))
        return cls(**kwargs)


_FIELD_NAMES = {f.name: f.name for f in fields(RequestRecord)}
_NONE_BY_DEFAULT = frozenset(f.name for f in fields(RequestRecord) if f.default is None)
