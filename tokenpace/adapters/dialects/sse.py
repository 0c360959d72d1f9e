"""Server-sent events: bytes in, the ``data`` payloads of complete events out.

Handles events split across reads, several events in one read, LF / CRLF / CR line ends (also a
CRLF split between two reads), comment lines, multi-line data and fields other than data.

Linear in the bytes fed: each read is normalised and searched once (only the new bytes, plus one
byte of overlap for a boundary split across reads), never the whole unfinished event again. An
event is bounded: past ``MAX_EVENT_BYTES`` without a blank line the parser stops with ``error``
set, and the caller records a protocol error (an endless line would otherwise grow without end).
"""

from __future__ import annotations

import orjson

DONE = b"[DONE]"
MAX_EVENT_BYTES = 1024 * 1024  # 1 MiB: far above any real chunk, far below trouble
_BOUNDARY = b"\n\n"


class SseParser:
    __slots__ = ("_buf", "_scan", "_skip_lf", "error", "max_event")

    def __init__(self, max_event: int = MAX_EVENT_BYTES) -> None:
        self._buf = bytearray()  # the unfinished event (line ends already normalised to LF)
        self._scan = 0  # where the next boundary search starts: bytes before it hold none
        self._skip_lf = False  # the previous read ended in CR: a leading LF belongs to it
        self.max_event = max_event
        self.error: str | None = None  # set once the stream broke the bound; then nothing more

    def feed(self, data: bytes) -> list[bytes]:
        if self.error is not None or not data:
            return []  # an empty read must not forget a pending CR
        if self._skip_lf:
            self._skip_lf = False
            if data[:1] == b"\n":
                data = data[1:]
        if b"\r" in data:
            self._skip_lf = data.endswith(b"\r")
            data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        buf = self._buf
        # Fast path: exactly one complete single-line data event, the common shape of a chunk.
        if (
            not buf
            and data.startswith(b"data:")
            and data.endswith(_BOUNDARY)
            and data.find(b"\n") == len(data) - 2
        ):
            if len(data) > self.max_event:
                return self._overflow()
            value = data[5:-2]
            return [value[1:] if value[:1] == b" " else value]
        buf += data
        out: list[bytes] = []
        start = 0
        pos = buf.find(_BOUNDARY, self._scan)
        while pos >= 0:
            if pos - start > self.max_event:
                self._overflow()
                return out
            payload = _event_data(buf[start:pos])
            if payload is not None:
                out.append(payload)
            start = pos + 2
            pos = buf.find(_BOUNDARY, start)
        if start:
            del buf[:start]  # O(1) for a bytearray prefix
        if len(buf) > self.max_event:
            self._overflow()
            return out  # the events before the endless one still count
        self._scan = max(len(buf) - 1, 0)  # a boundary may straddle this read and the next
        return out

    def _overflow(self) -> list[bytes]:
        self.error = f"event over {_size(self.max_event)} without a blank line"
        self._buf = bytearray()
        self._scan = 0
        return []

    @property
    def pending(self) -> bytes:
        """Bytes of an event not yet terminated by a blank line."""
        return bytes(self._buf)

    @property
    def pending_len(self) -> int:
        return len(self._buf)


def _size(n: int) -> str:
    if n % (1024 * 1024) == 0:
        return f"{n // (1024 * 1024)} MiB"
    if n % 1024 == 0:
        return f"{n // 1024} KiB"
    return f"{n} bytes"


def _event_data(block: bytes | bytearray) -> bytes | None:
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


def parse_data(payload: bytes) -> dict | None:
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
