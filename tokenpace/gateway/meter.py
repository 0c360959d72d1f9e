"""Timestamps the tokens of a proxied response from a copy of its bytes; never changes what is forwarded.

Reuses the offline client's pieces (SSE parser, dialect classifiers), so a gateway record means
exactly what a bench record means.
"""

from __future__ import annotations

import zlib

import orjson

from tokenpace.client.dialects import OpenAIChat, OpenAICompletions
from tokenpace.client.dialects.base import ANSWER, ERROR, Dialect, error_text
from tokenpace.client.sse import SseParser, parse_data
from tokenpace.core.record import RequestRecord

_BODY_LIMIT = 8 * 1024 * 1024  # non-streamed bodies beyond this are forwarded but not parsed


def dialect_for(path: str) -> Dialect | None:
    if path.endswith("/chat/completions"):
        return OpenAIChat()
    if path.endswith("/completions"):
        return OpenAICompletions()
    return None


class Meter:
    """Feed it every body chunk with its arrival time; it fills the record's token fields."""

    __slots__ = ("_body", "_inflate", "dialect", "done", "error", "protocol_error", "record", "sse")

    def __init__(self, record: RequestRecord, dialect: Dialect, content_type: str, encoding: str) -> None:
        self.record = record
        self.dialect = dialect
        self.sse = SseParser() if content_type.startswith("text/event-stream") else None
        self._body = bytearray()
        self.done = False  # [DONE] seen
        self.error: str | None = None  # the upstream reported an error inside the stream
        self.protocol_error: str | None = None
        # Compressed bodies are forwarded as they are; a decompressed copy is measured.
        self._inflate = None
        if encoding in ("gzip", "x-gzip"):
            self._inflate = zlib.decompressobj(wbits=31)
        elif encoding == "deflate":
            self._inflate = zlib.decompressobj()
        elif encoding not in ("", "identity"):
            self.sse = None
            self.protocol_error = f"content-encoding {encoding} not measured"

    def feed(self, data: bytes, now: int) -> None:
        if self._inflate is not None:
            try:
                data = self._inflate.decompress(data)
            except zlib.error:
                self._inflate, self.sse = None, None
                self.protocol_error = "undecodable compressed body"
                return
        if self.sse is None:
            if self.protocol_error is None and len(self._body) < _BODY_LIMIT:
                self._body += data
            return
        if self.error is not None or self.protocol_error is not None:
            return  # measurement stopped; bytes still flow
        rec = self.record
        for payload in self.sse.feed(data):
            try:
                chunk = parse_data(payload)
            except ValueError as exc:
                self.protocol_error = str(exc)
                return
            if chunk is None:
                self.done = True
                continue
            flags = self.dialect.classify(chunk, rec)
            if not flags:
                continue
            if flags & ERROR:
                self.error = f"error event in stream: {error_text(chunk)}"[:200]
                return
            rec.note_token_chunk(now, bool(flags & ANSWER))

    @property
    def saw_token(self) -> bool:
        return self.record.first_token_ns is not None

    def finish_stream_ok(self) -> bool:
        """At a clean end of body: did the stream end as a complete answer?"""
        if self.sse is None:
            return True
        return self.done or self.record.finish_reason is not None

    def finish_full(self, now: int) -> None:
        """Non-streamed body complete: the whole answer arrived at once, so TTFT equals E2E."""
        if self.sse is not None or self.protocol_error is not None or not self._body:
            return
        try:
            response = orjson.loads(self._body)
        except orjson.JSONDecodeError:
            self.protocol_error = "response body is not JSON"
            return
        if type(response) is not dict:
            return
        rec = self.record
        flags = self.dialect.read_full(response, rec)
        if flags & ERROR:
            self.error = f"server error: {error_text(response)}"[:200]
        elif flags:
            rec.first_token_ns = now
            if flags & ANSWER:
                rec.first_answer_ns = now
            rec.token_ns.append(now)
