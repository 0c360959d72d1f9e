"""The client's reader of one response (tokenpace.wire.exchange.Reader): turns body bytes into token
timestamps on the record.

Its ``on_*`` methods run inside the connection's ``data_received``: no logging, no per-token objects
beyond the one int appended to ``token_ns`` (capped: ``TOKEN_TIMESTAMPS_KEPT``), JSON parsed once per
chunk. A compressed body is inflated a bounded step at a time, with the same caps as a plain one
(tokenpace.wire.inflate), and at most ``TURN_BYTES`` per loop turn, as the gateway's meter does:
past it the connection's reading pauses, the rest is inflated and read a slice per turn (its
tokens keep the arrival time of the read that carried them), and a body that ended meanwhile ends
the request only once all of it is read. A gzip bomb therefore never holds the loop that times the
other requests for more than a slice.
"""

from __future__ import annotations

import asyncio

import orjson

from tokenpace.core.record import RequestRecord, Status
from tokenpace.wire.connection import HttpConnection
from tokenpace.wire.dialects.base import ANSWER, ERROR, Dialect, error_text
from tokenpace.wire.exchange import Exchange
from tokenpace.wire.inflate import MAX_STREAM_BYTES, TURN_BYTES, InflateError, Inflater, supported
from tokenpace.wire.sse import SseParser, parse_data

_ERROR_BODY_LIMIT = 4096
MAX_BODY_BYTES = 16 * 1024 * 1024  # a non-streamed answer (an embedding of one input is < 100 KB)


class Measure:
    __slots__ = (
        "_prev_server_tokens",
        "body_bytes",
        "capture",
        "conn",
        "dialect",
        "done",
        "done_ns",
        "end_ns",
        "exchange",
        "inflated_ns",
        "inflater",
        "loop",
        "lost",
        "over",
        "paused",
        "record",
        "sse",
        "stream",
    )

    def __init__(
        self, record: RequestRecord, dialect: Dialect, stream: bool, loop: asyncio.AbstractEventLoop
    ) -> None:
        self.record = record
        self.dialect = dialect
        self.stream = stream
        self.exchange = Exchange(loop, self)  # what the connection drives; its ``done`` ends the wait
        self.over = self.exchange.done
        self.sse: SseParser | None = None
        self.inflater: Inflater | None = None
        self.body_bytes = bytearray()
        self.done = False  # [DONE] seen
        self.done_ns = 0  # when [DONE] arrived
        self._prev_server_tokens: int | None = None
        self.capture: list[bytes] | None = None  # raw token chunks, kept for multi-turn history
        self.loop = loop
        self.conn: HttpConnection | None = None  # set by the sender: paused while inflating
        self.paused = False  # reading paused: compressed input waits to be inflated
        self.inflated_ns = 0  # arrival of the compressed bytes being inflated
        self.end_ns: int | None = None  # the body ended while still inflating: the end waits
        self.lost: tuple[str, int] | None = None  # the connection closed while inflating: it waits too

    # --- events from the exchange ---
    def on_head(self, ex: Exchange, now: int) -> None:
        rec = self.record
        rec.headers_ns = now
        rec.http_status = status = ex.status
        if ex.encoding and ex.encoding != b"identity":
            encoding = ex.encoding.decode("latin-1")
            if not supported(encoding):
                self.fail(Status.PROTOCOL_ERROR, f"content-encoding {encoding} not supported", now)
                return
            streamed = 200 <= status < 300 and self.stream
            self.inflater = Inflater(encoding, MAX_STREAM_BYTES if streamed else MAX_BODY_BYTES)
            ex.on_body = self._inflate_body
        if 200 <= status < 300 and self.stream:
            if ex.content_type.startswith(b"application/json"):
                return  # the server ignored stream=true; read it as one JSON response
            self.sse = SseParser()

    def _inflate_body(self, data: bytes, now: int) -> None:
        """A compressed body's piece, inflated a bounded step at a time and read step by step, at
        most ``TURN_BYTES`` a turn."""
        inflater = self.inflater
        if self.over.done() or inflater is None:
            return
        if inflater.pending:  # a slice waits for its turn: this input waits behind it
            inflater.keep(data)
            return
        self.inflated_ns = now
        self._inflate(inflater, data)

    def _inflate(self, inflater: Inflater, data: bytes) -> None:
        now = self.inflated_ns
        try:
            for piece in inflater.feed(data, TURN_BYTES):
                self.on_body(piece, now)
                if self.over.done():
                    return
        except InflateError as exc:
            self.fail(Status.PROTOCOL_ERROR, str(exc), now)
            return
        if inflater.pending:
            if not self.paused and self.conn is not None:
                self.paused = True
                self.conn.pause_reading()
            self.loop.call_soon(self._inflate_next)
            return
        self._resume()
        if self.end_ns is not None:
            self.exchange.finishing = False
            self.on_end(self.end_ns)
        elif self.lost is not None:  # judged on the whole of what came ([DONE] may be in it)
            self.exchange.finishing = False
            self.on_failed(*self.lost, lost=True)

    def _inflate_next(self) -> None:
        inflater = self.inflater
        if self.over.done() or inflater is None:
            return
        self._inflate(inflater, b"")

    def _resume(self) -> None:
        if self.paused and self.conn is not None:
            self.paused = False
            self.conn.resume_reading()

    def on_body(self, data: bytes, now: int) -> None:
        if self.over.done():
            return
        if self.sse is None:
            if self.record.http_status is not None and self.record.http_status >= 300:
                room = _ERROR_BODY_LIMIT - len(self.body_bytes)
                if room > 0:
                    self.body_bytes += data[:room]
            elif len(self.body_bytes) + len(data) > MAX_BODY_BYTES:
                self.fail(Status.PROTOCOL_ERROR, f"response body over {MAX_BODY_BYTES >> 20} MiB", now)
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

    def on_end(self, now: int) -> None:
        if self.over.done():
            return
        if self.inflater is not None and self.inflater.pending:  # read the rest first
            self.end_ns = now
            self.exchange.finishing = True
            return
        rec = self.record
        status = rec.http_status or 0
        if status >= 300:
            self.fail(Status.HTTP_ERROR, _http_error_text(status, bytes(self.body_bytes)), now)
            return
        if self.sse is not None:
            if self.sse.pending_len and self.sse.pending.strip():
                self.fail(Status.STREAM_INTERRUPTED, "stream ended inside an unterminated event", now)
            elif self.done or rec.finish_reason:
                self.finish(now)
            else:
                self.fail(Status.STREAM_INTERRUPTED, "stream ended before [DONE]", now)
            return
        self._read_full(now)

    def on_failed(self, reason: str, now: int, lost: bool) -> None:
        if lost and self.inflater is not None and self.inflater.pending and not self.over.done():
            self.lost = (reason, now)  # what arrived before the close is read first
            self.exchange.finishing = True
            return
        self.lost = None
        if not lost:
            self.fail(Status.PROTOCOL_ERROR, reason, now)
        elif self.done and self.record.headers_ns is not None:
            self.finish(self.done_ns)  # [DONE] arrived; the server closed instead of ending the body
        else:
            self.fail(Status.STREAM_INTERRUPTED, reason, now)

    # --- outcome ---
    def finish(self, now: int) -> None:
        self._resume()  # a connection given back reads again
        if not self.over.done():
            self.record.end_ns = now
            self.record.status = Status.OK
            self.over.set_result(None)

    def fail(self, status: Status, reason: str, now: int) -> None:
        self._resume()
        if not self.over.done():
            self.record.end_ns = now
            self.record.status = status
            self.record.error = reason
            self.over.set_result(None)

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
