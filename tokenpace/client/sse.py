"""Server-sent events: bytes in, the ``data`` payloads of complete events out.

Handles events split across reads, several events in one read, LF / CRLF / CR line ends (also a
CRLF split between two reads), comment lines, multi-line data and fields other than data.
"""

from __future__ import annotations

import orjson

DONE = b"[DONE]"


class SseParser:
    __slots__ = ("_buf", "_skip_lf")

    def __init__(self) -> None:
        self._buf = b""
        self._skip_lf = False  # the previous read ended in CR: a leading LF belongs to it

    def feed(self, data: bytes) -> list[bytes]:
        if self._skip_lf:
            self._skip_lf = False
            if data[:1] == b"\n":
                data = data[1:]
        if b"\r" in data:
            self._skip_lf = data.endswith(b"\r")
            data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        buf = self._buf + data if self._buf else data
        # Fast path: exactly one complete single-line data event, the common shape of a chunk.
        if buf.startswith(b"data:") and buf.endswith(b"\n\n") and buf.find(b"\n") == len(buf) - 2:
            self._buf = b""
            value = buf[5:-2]
            return [value[1:] if value[:1] == b" " else value]
        events = buf.split(b"\n\n")
        self._buf = events.pop()  # the incomplete tail (b"" when buf ended on a boundary)
        out = []
        for block in events:
            payload = _event_data(block)
            if payload is not None:
                out.append(payload)
        return out

    @property
    def pending(self) -> bytes:
        """Bytes of an event not yet terminated by a blank line."""
        return self._buf


def _event_data(block: bytes) -> bytes | None:
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
