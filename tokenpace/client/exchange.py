"""One request and its response: turns body bytes into token timestamps on the record.

Its ``response_*`` methods are the HTTP/1.1 kernel's events (tokenpace.wire.http1.client) and run inside
the connection's ``data_received``: no logging, no per-token objects beyond the one int appended to
``token_ns`` (capped: ``TOKEN_TIMESTAMPS_KEPT``), JSON parsed once per chunk.
"""

from __future__ import annotations

import asyncio

import orjson

from tokenpace.core.record import RequestRecord, Status
from tokenpace.wire.dialects.base import ANSWER, ERROR, Dialect, error_text
from tokenpace.wire.sse import SseParser, parse_data

_ERROR_BODY_LIMIT = 4096


class Exchange:
    __slots__ = (
        "_prev_server_tokens",
        "body_bytes",
        "capture",
        "content_type",
        "dialect",
        "done",
        "done_ns",
        "future",
        "record",
        "sse",
        "stream",
    )

    def __init__(self, record: RequestRecord, dialect: Dialect, stream: bool, future: asyncio.Future) -> None:
        self.record = record
        self.dialect = dialect
        self.stream = stream
        self.future = future
        self.sse: SseParser | None = None
        self.body_bytes = bytearray()
        self.content_type = b""
        self.done = False
        self.done_ns = 0  # when [DONE] arrived
        self._prev_server_tokens: int | None = None
        self.capture: list[bytes] | None = None  # raw token chunks, kept for multi-turn history

    # --- events from the connection ---
    def response_header(self, name: bytes, low_name: bytes, value: bytes) -> None:
        if low_name == b"content-type":
            self.content_type = value

    def response_interim(self) -> None:
        self.content_type = b""  # a 1xx's; the real response has its own

    def response_head(self, status: int, now: int) -> None:
        rec = self.record
        rec.headers_ns = now
        rec.http_status = status
        if 200 <= status < 300 and self.stream:
            if self.content_type.startswith(b"application/json"):
                return  # the server ignored stream=true; read it as one JSON response
            self.sse = SseParser()

    def response_body(self, data: bytes, now: int) -> None:
        if self.future.done():
            return
        if self.sse is None:
            if self.record.http_status is not None and self.record.http_status >= 300:
                room = _ERROR_BODY_LIMIT - len(self.body_bytes)
                if room > 0:
                    self.body_bytes += data[:room]
            else:
                self.body_bytes += data
            return
        rec = self.record
        sse = self.sse
        for payload in sse.feed(data):
            try:
                chunk = parse_data(payload)
            except ValueError as exc:
                self.fail(Status.PROTOCOL_ERROR, str(exc), now)
                return
            if chunk is None:
                self.done = True
                self.done_ns = now
                continue
            try:
                flags = self.dialect.classify(chunk, rec)
            except (AttributeError, TypeError, KeyError, IndexError, ValueError) as exc:
                self.fail(Status.PROTOCOL_ERROR, f"unexpected chunk shape ({exc}): {payload[:60]!r}", now)
                return
            if not flags:
                continue
            if flags & ERROR:
                self.fail(Status.STREAM_INTERRUPTED, f"server error in stream: {error_text(chunk)}", now)
                return
            rec.note_token_chunk(now, bool(flags & ANSWER))
            if self.capture is not None:
                self.capture.append(payload)
            if rec.output_tokens_server is not None:  # per-chunk usage (vLLM continuous_usage_stats)
                self._note_chunk_tokens(rec)
        if sse.error is not None:  # an event past the bound: the stream is broken, stop reading it
            self.fail(Status.PROTOCOL_ERROR, sse.error, now)

    def response_end(self, now: int) -> None:
        if self.future.done():
            return
        rec = self.record
        status = rec.http_status or 0
        if status >= 300:
            self.fail(Status.HTTP_ERROR, _http_error_text(status, bytes(self.body_bytes)), now)
            return
        if self.sse is not None:
            if self.sse.pending.strip():
                self.fail(Status.STREAM_INTERRUPTED, "stream ended inside an unterminated event", now)
            elif self.done or rec.finish_reason:
                self.finish(now)
            else:
                self.fail(Status.STREAM_INTERRUPTED, "stream ended before [DONE]", now)
            return
        self._read_full(now)

    def response_lost(self, exc: Exception | None, now: int, body_ended: bool) -> None:
        if self.future.done():
            return
        if self.record.headers_ns is None:
            reason = "connection closed before the response headers"
        elif self.done:
            self.finish(self.done_ns)  # [DONE] arrived; the server closed instead of ending the body
            return
        elif body_ended:
            self.response_end(now)  # a body delimited by the close (HTTP/1.0 style): this is its end
            return
        else:
            reason = "connection closed mid-stream"
        if exc is not None:
            reason += f" ({exc})"
        self.fail(Status.STREAM_INTERRUPTED, reason, now)

    def response_malformed(self, reason: str, now: int) -> None:
        self.fail(Status.PROTOCOL_ERROR, reason, now)

    # --- outcome ---
    def finish(self, now: int) -> None:
        if not self.future.done():
            self.record.end_ns = now
            self.record.status = Status.OK
            self.future.set_result(True)

    def fail(self, status: Status, reason: str, now: int) -> None:
        if not self.future.done():
            self.record.end_ns = now
            self.record.status = status
            self.record.error = reason
            self.future.set_result(False)

    # --- helpers (not per chunk) ---
    def _note_chunk_tokens(self, rec: RequestRecord) -> None:
        total = rec.output_tokens_server or 0
        if rec.chunk_tokens is None:
            rec.chunk_tokens = []
        if not rec.token_ns_dropped:  # one entry per kept timestamp: capped with them
            rec.chunk_tokens.append(total - (self._prev_server_tokens or 0))
        self._prev_server_tokens = total

    def _read_full(self, now: int) -> None:
        rec = self.record
        try:
            response = orjson.loads(self.body_bytes)
        except orjson.JSONDecodeError:
            self.fail(Status.PROTOCOL_ERROR, "response body is not JSON", now)
            return
        if type(response) is not dict:
            self.fail(Status.PROTOCOL_ERROR, "response body is not a JSON object", now)
            return
        try:
            flags = self.dialect.read_full(response, rec)
        except (AttributeError, TypeError, KeyError, IndexError, ValueError) as exc:
            self.fail(Status.PROTOCOL_ERROR, f"unexpected response shape ({exc})", now)
            return
        if self.capture is not None:
            self.capture.append(bytes(self.body_bytes))
        if flags & ERROR:
            self.fail(Status.HTTP_ERROR, f"server error: {error_text(response)}", now)
            return
        if flags:
            # Non-streamed: the whole answer arrives at once, so TTFT equals E2E. Only the
            # server's usage can tell the token count (no chunks to count).
            rec.first_token_ns = now
            if flags & ANSWER:
                rec.first_answer_ns = now
            rec.token_ns.append(now)
        self.finish(now)


def _http_error_text(status: int, body: bytes) -> str:
    message = ""
    try:
        parsed = orjson.loads(body)
        if isinstance(parsed, dict):
            message = error_text(parsed) or parsed.get("message") or parsed.get("detail") or ""
    except orjson.JSONDecodeError:
        message = body.decode("utf-8", "replace").strip()
    message = " ".join(str(message).split())[:160]
    return f"HTTP {status}" + (f": {message}" if message else "")
