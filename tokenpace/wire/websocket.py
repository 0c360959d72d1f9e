"""WebSocket framing (RFC 6455), server side: the handshake answer, masked frames in, frames out;
and the masking rule watched on either side (a client's frames masked, a server's not).

Only what the sim's realtime endpoint needs: text, binary, ping/pong and close frames, fragmented
messages joined; no extensions (no permessage-deflate is negotiated).
"""

from __future__ import annotations

import base64
import hashlib
import re
from typing import Any

TEXT, BINARY, CLOSE, PING, PONG = 0x1, 0x2, 0x8, 0x9, 0xA
_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def accept_key(key: str) -> str:
    """The Sec-WebSocket-Accept value for a client's Sec-WebSocket-Key."""
    return base64.b64encode(hashlib.sha1(key.encode("latin-1") + _GUID).digest()).decode()


def frame(payload: bytes, opcode: int = TEXT) -> bytes:
    """One unmasked, final frame (a server never masks)."""
    n = len(payload)
    if n < 126:
        head = bytes((0x80 | opcode, n))
    elif n < 65536:
        head = bytes((0x80 | opcode, 126)) + n.to_bytes(2, "big")
    else:
        head = bytes((0x80 | opcode, 127)) + n.to_bytes(8, "big")
    return head + payload


def _unmask(payload: bytes, mask: bytes) -> bytes:
    n = len(payload)
    if not n:
        return payload
    key = (mask * (n // 4 + 1))[:n]
    return (int.from_bytes(payload, "big") ^ int.from_bytes(key, "big")).to_bytes(n, "big")


class FrameReader:
    """Bytes in, complete messages out as (opcode, payload); control frames as they come."""

    __slots__ = ("_buf", "_part_op", "_parts")

    def __init__(self) -> None:
        self._buf = bytearray()
        self._parts: list[bytes] = []
        self._part_op = 0

    def feed(self, data: bytes) -> list[tuple[int, bytes]]:
        self._buf += data
        out: list[tuple[int, bytes]] = []
        while True:
            parsed = self._next_frame()
            if parsed is None:
                return out
            fin, opcode, payload = parsed
            if opcode >= CLOSE:  # control frames may come between a message's fragments
                out.append((opcode, payload))
            elif not fin:
                self._part_op = opcode or self._part_op
                self._parts.append(payload)
            elif opcode == 0 and self._parts:  # the last fragment
                out.append((self._part_op, b"".join([*self._parts, payload])))
                self._parts = []
            else:
                out.append((opcode, payload))

    def _next_frame(self) -> tuple[bool, int, bytes] | None:
        buf = self._buf
        if len(buf) < 2:
            return None
        fin, opcode = bool(buf[0] & 0x80), buf[0] & 0x0F
        masked, n, i = buf[1] & 0x80, buf[1] & 0x7F, 2
        if n >= 126:
            width = 2 if n == 126 else 8
            if len(buf) < 2 + width:
                return None
            n, i = int.from_bytes(buf[2 : 2 + width], "big"), 2 + width
        mask = b""
        if masked:
            mask, i = bytes(buf[i : i + 4]), i + 4
        if len(buf) < i + n:
            return None
        payload = bytes(buf[i : i + n])
        del buf[: i + n]
        return fin, opcode, _unmask(payload, mask) if mask else payload


def _small_frames(masked: bool) -> re.Pattern[bytes]:
    """A run of whole frames with a 7-bit length (0-125) and the mask bit ``masked``: matched in C,
    so a flood of tiny frames (130,000 in one read) is not one Python round each."""
    key = 4 if masked else 0
    # the first byte factored out, and no empty repeat for an empty payload: each frame costs one
    # literal test per length tried (an empty ``{0}`` repeat made a flood of empty frames slower)
    alternatives = (
        re.escape(bytes(((0x80 if masked else 0) | n,)))
        + (rb"[\x00-\xff]{%d}" % (key + n) if key + n else b"")
        for n in range(126)
    )
    return re.compile(rb"(?:[\x00-\xff](?:" + b"|".join(alternatives) + rb"))+")


_SMALL_FRAMES = {True: _small_frames(True), False: _small_frames(False)}


class MaskWatch:
    """Watches one side's frame headers go by (without buffering payloads): RFC 6455 5.1, every
    frame a client sends is masked and none a server sends is; the receiver closes the connection
    (code 1002) on the first frame that breaks the rule. ``from_client``: the frames watched are a
    client's (masked expected), else a server's (unmasked expected).

    ``scan(data)`` returns ``(ok, bad)``: ``ok`` the bytes that may be passed on now, and ``bad``
    whether a frame breaking the rule starts right after them (then nothing more should be passed
    on). A frame header is held back until whole (at most 14 bytes), so the verdict never straddles
    reads.
    """

    __slots__ = ("_held", "_skip", "from_client")

    def __init__(self, from_client: bool = True) -> None:
        self.from_client = from_client
        self._held = b""  # an incomplete frame header from the previous read
        self._skip = 0  # payload bytes of the current frame still to pass

    def scan(self, data: bytes) -> tuple[bytes, bool]:
        buf = self._held + data if self._held else data
        self._held = b""
        n = len(buf)
        i = min(self._skip, n)  # the rest of a payload begun in an earlier read
        self._skip -= i
        want = 0x80 if self.from_client else 0
        key = 4 if self.from_client else 0  # the masking key's bytes in a good frame's header
        small = _SMALL_FRAMES[self.from_client].match
        while i < n - 1:
            run = small(buf, i)
            if run is not None:  # whole small frames that keep the rule: skipped at once
                i = run.end()
                if i >= n - 1:
                    break
            second = buf[i + 1]
            if second & 0x80 != want:
                return buf[:i], True
            length = second & 0x7F
            head = 2 + key
            if length >= 126:
                ext = 2 if length == 126 else 8
                head += ext
                if n - i < head:
                    break
                length = int.from_bytes(buf[i + 2 : i + 2 + ext], "big")
            elif n - i < head:
                break
            end = i + head + length
            if end > n:  # the payload goes on in later reads
                self._skip = end - n
                i = n
                break
            i = end
        self._held = buf[i:]
        return (buf if i == n else buf[:i]), False


# A frame aiohttp's own reader refuses with 1002 (RSV2 and RSV3 set, empty; masked, which its reader
# takes from either side): what it is fed in place of a frame breaking the masking rule, so the
# session ends on aiohttp's protocol-error path.
PROTOCOL_ERROR_FRAME = b"\xb1\x80\x00\x00\x00\x00"


class MaskedFrames:
    """A WebSocket frame parser (aiohttp's WebSocketReader, duck-typed: ``feed_data``,
    ``feed_eof``) behind a ``MaskWatch``: frames pass on until one breaks the masking rule, in
    whose place the parser gets a frame it refuses with 1002, and then nothing more. ``broken``
    tells the owner why the session ended."""

    __slots__ = ("broken", "parser", "watch")

    def __init__(self, parser: Any, from_client: bool = True) -> None:
        self.parser = parser
        self.watch = MaskWatch(from_client)
        self.broken = False

    def feed_eof(self) -> None:
        self.parser.feed_eof()

    def feed_data(self, data: bytes) -> tuple[bool, bytes]:
        if self.broken:
            return False, b""
        ok, bad = self.watch.scan(bytes(data))
        if bad:
            self.broken = True
            ok += PROTOCOL_ERROR_FRAME
        result: tuple[bool, bytes] = self.parser.feed_data(ok) if ok else (False, b"")
        return result
