"""Bounded incremental decompression of a response body (Content-Encoding gzip or deflate).

A small compressed body can inflate to gigabytes (1 MB of gzip holds 1 GiB of zeros). So nothing is
inflated in one call: each piece is inflated at most ``STEP_BYTES`` at a time (what is held at once),
and the whole body at most ``max_bytes`` (the reader's own cap on a plain body); past it the reader
gets ``InflateError`` with the reason, and stops. A caller on an event loop also passes a ``budget``:
at most that many bytes are inflated in one call, the input left is kept (``pending``) and inflated
by the next call (``feed(b"")`` or with more input), so a bomb is worked through a slice per turn.
Bytes after the end of the compressed data (zlib keeps them in ``unused_data``, outside any cap)
are refused with ``InflateError``: a body has one compressed stream, and its end is the body's.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator

STEP_BYTES = 64 * 1024  # inflated bytes handed on at once
MAX_STREAM_BYTES = 64 * 1024 * 1024  # an inflated event stream (real ones are kilobytes to a few MB)
TURN_BYTES = 64 * 1024  # inflated per call by a caller on the loop (a fraction of a millisecond)


class InflateError(ValueError):
    pass


_PAST_END = "data after the end of the compressed body"


def _size(n: int) -> str:
    return f"{n // (1024 * 1024)} MiB" if n >= 1024 * 1024 else f"{n // 1024} KiB"


class Inflater:
    __slots__ = ("_z", "left", "max_bytes", "tail")

    def __init__(self, encoding: str, max_bytes: int) -> None:
        """``encoding``: the Content-Encoding value, lower-cased (gzip, x-gzip or deflate)."""
        self._z = zlib.decompressobj(wbits=31 if encoding in ("gzip", "x-gzip") else 15)
        self.max_bytes = max_bytes
        self.left = max_bytes  # inflated bytes this body may still produce
        self.tail = b""  # input not yet inflated, past a call's budget (at most one call's input)

    def keep(self, data: bytes) -> None:
        """More input while a slice is pending: inflated after it, by later calls (the caller has
        paused reading, so this is at most the rest of one read)."""
        if data:
            self.tail += data

    @property
    def pending(self) -> bool:
        """Input is left over from a call past its budget: call ``feed`` again."""
        return bool(self.tail)

    def feed(self, data: bytes, budget: int | None = None) -> Iterator[bytes]:
        """The inflated bytes of ``data`` (after any left over), in pieces of at most STEP_BYTES, at
        most about ``budget`` of them in this call. Raises InflateError when the body is not valid
        compressed data or would inflate past ``max_bytes``."""
        z = self._z
        if self.tail:
            data, self.tail = self.tail + data, b""
        given = 0
        while data:
            if z.eof:  # a byte past the end of the compressed stream: never kept
                raise InflateError(_PAST_END)
            if budget is not None and given >= budget:
                self.tail = bytes(data)
                return
            try:
                out = z.decompress(data, min(STEP_BYTES, self.left + 1))
            except zlib.error:
                raise InflateError("undecodable compressed body") from None
            data = z.unconsumed_tail
            if z.unused_data:
                raise InflateError(_PAST_END)
            if len(out) > self.left:
                self.left = -1
                raise InflateError(f"compressed body inflates past {_size(self.max_bytes)}")
            self.left -= len(out)
            if not out:
                return  # input used up (or past the end of the compressed data)
            given += len(out)
            yield out


def supported(encoding: str) -> bool:
    return encoding in ("gzip", "x-gzip", "deflate")
