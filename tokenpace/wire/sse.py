"""Server-sent events: bytes in, the ``data`` payloads of complete events out.

Handles events split across reads, several events in one read, LF / CRLF / CR line ends (also a
CRLF split between two reads), comment lines, multi-line data and fields other than data.

Linear in the bytes fed: each read is normalised and searched once (only the new bytes, and the
one boundary that can straddle two reads), never the whole unfinished event again; the pieces of an
unfinished event are kept as they came and joined once, when its blank line arrives. An
event is bounded: past ``MAX_EVENT_BYTES`` without a blank line the parser stops with ``error``
set, and the caller records a protocol error (an endless line would otherwise grow without end).
Comment lines of an unfinished event are dropped as they complete (a stream of keep-alive comments
with no blank line is not an event growing past the bound), and a UTF-8 byte order mark opening
the stream is skipped (the spec's own rule: its first event is not lost).
"""

from __future__ import annotations

from typing import Any

import orjson

DONE = b"[DONE]"
MAX_EVENT_BYTES = 1024 * 1024  # 1 MiB: far above any real chunk, far below trouble
_BOUNDARY = b"\n\n"
_BOM = b"\xef\xbb\xbf"


class SseParser:
    __slots__ = ("_head", "_len", "_parts", "_skip_lf", "_started", "error", "max_event")

    def __init__(self, max_event: int = MAX_EVENT_BYTES) -> None:
        # The unfinished event, as the reads that brought it (line ends normalised to LF): kept,
        # never joined or searched again until its blank line comes. It holds no blank line.
        self._parts: list[bytes] = []
        self._len = 0
        self._skip_lf = False  # the previous read ended in CR: a leading LF belongs to it
        self._started = False  # the stream's first bytes (and any BOM) are behind us
        self._head = b""  # the first bytes while they may still be a BOM (at most 2)
        self.max_event = max_event
        self.error: str | None = None  # set once the stream broke the bound; then nothing more

    def feed(self, data: bytes) -> list[bytes]:
        if self.error is not None or not data:
            return []  # an empty read must not forget a pending CR
        if not self._started:
            data, self._head = self._head + data, b""
            if len(data) < 3 and _BOM.startswith(data):  # a BOM split across reads: wait for it
                self._head = data
                return []
            self._started = True
            if data.startswith(_BOM):
                data = data[3:]
                if not data:
                    return []
        if self._skip_lf:
            self._skip_lf = False
            if data[:1] == b"\n":
                data = data[1:]
                if not data:
                    return []
        if b"\r" in data:
            self._skip_lf = data.endswith(b"\r")
            data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        if not self._parts:
            # Fast path: exactly one complete single-line data event, the common shape of a chunk.
            if data.startswith(b"data:") and data.endswith(_BOUNDARY) and data.find(b"\n") == len(data) - 2:
                if len(data) > self.max_event:
                    return self._overflow()
                value = data[5:-2]
                return [value[1:] if value[:1] == b" " else value]
            return self._split(data)
        # An event is pending: only the new bytes are searched, plus the one boundary that can
        # straddle the two reads (pending ends in LF, the read starts with LF).
        if data[:1] == b"\n" and self._parts[-1][-1:] == b"\n":
            event, rest = b"".join(self._parts)[:-1], data[1:]
        else:
            i = data.find(_BOUNDARY)
            if i < 0:
                data = _without_comments(data, self._parts[-1][-1:] == b"\n")
                if data:
                    self._parts.append(data)
                    self._len += len(data)
                return self._overflow() if self._len > self.max_event else []
            event, rest = b"".join(self._parts) + data[:i], data[i + 2 :]
        self._parts, self._len = [], 0
        if len(event) > self.max_event:
            return self._overflow()
        out = []
        payload = _event_data(event)
        if payload is not None:
            out.append(payload)
        if rest:
            out += self._split(rest)
        return out

    def _split(self, data: bytes) -> list[bytes]:
        """Events of a read that starts a new event (nothing pending)."""
        events = data.split(_BOUNDARY)
        tail = events.pop()  # the unfinished event (b"" when the read ended on a boundary)
        out: list[bytes] = []
        for block in events:
            if len(block) > self.max_event:
                self._overflow()
                return out  # the events before the oversized one still count
            payload = _event_data(block)
            if payload is not None:
                out.append(payload)
        tail = _without_comments(tail, True)
        if tail:
            if len(tail) > self.max_event:
                self._overflow()
                return out
            self._parts.append(tail)
            self._len = len(tail)
        return out

    def _overflow(self) -> list[bytes]:
        self.error = f"event over {_size(self.max_event)} without a blank line"
        self._parts, self._len = [], 0
        return []

    @property
    def pending(self) -> bytes:
        """Bytes of an event not yet terminated by a blank line."""
        return b"".join(self._parts)

    @property
    def pending_len(self) -> int:
        return self._len


def _size(n: int) -> str:
    if n % (1024 * 1024) == 0:
        return f"{n // (1024 * 1024)} MiB"
    if n % 1024 == 0:
        return f"{n // 1024} KiB"
    return f"{n} bytes"


def _without_comments(chunk: bytes, line_start: bool) -> bytes:
    """``chunk`` of an unfinished event without its complete comment lines (``:...\n``), which carry
    nothing: a flood of them is no event growing. ``line_start``: the chunk begins a line. The
    last, unfinished line is kept whatever it is (an endless one still meets the bound)."""
    if not (chunk.startswith(b":") or b"\n:" in chunk):
        return chunk
    lines = chunk.split(b"\n")
    last = lines.pop()
    kept = [ln for i, ln in enumerate(lines) if not ln.startswith(b":") or (i == 0 and not line_start)]
    return b"".join(ln + b"\n" for ln in kept) + last


def _event_data(block: bytes) -> bytes | None:
    if block.startswith(b"data:") and b"\n" not in block:  # one data line: the common event
        value = block[5:]
        return value[1:] if value[:1] == b" " else value
    data_lines = []
    for line in block.split(b"\n"):
        if line.startswith(b"data:"):
            value = line[5:]
            data_lines.append(value[1:] if value[:1] == b" " else value)
        elif line == b"data":
            data_lines.append(b"")
        # comment lines (":...") and other fields (event, id, retry) carry no payload
    if not data_lines:
        return None
    return b"\n".join(data_lines)


def parse_data(payload: bytes) -> dict[str, Any] | None:
    """The JSON object an OpenAI-style event carries; None for ``[DONE]``.

    Raises ValueError, with a short message, for anything else: a stream that breaks this is broken.
    """
    if payload == DONE:
        return None
    try:
        chunk = orjson.loads(payload)
    except orjson.JSONDecodeError:
        raise ValueError(f"malformed JSON in stream: {payload[:60]!r}") from None
    if type(chunk) is not dict:
        raise ValueError(f"stream chunk is not an object: {payload[:60]!r}")
    return chunk
