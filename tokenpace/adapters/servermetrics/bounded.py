"""One HTTP answer's body read within a size cap and a deadline for the whole read.

urllib's ``timeout`` bounds each socket read, not the body: a server sending one byte a second
never trips it, and ``read()`` of an endless body grows without end. Here the body is read a piece
at a time (``read1``: what has arrived, at most ``PIECE_BYTES``) until it ends, passes ``cap``
bytes or the ``deadline`` (time.monotonic) passes.
"""

from __future__ import annotations

import time
from http.client import HTTPResponse

PIECE_BYTES = 64 * 1024


class ReadBoundError(ValueError):
    """The body passed its size cap or its deadline; the message says which."""


def read_bounded(resp: HTTPResponse, cap: int, deadline: float) -> bytes:
    parts: list[bytes] = []
    size = 0
    while True:
        if time.monotonic() > deadline:
            raise ReadBoundError("too slow: not complete within its deadline")
        piece = resp.read1(PIECE_BYTES)
        if not piece:
            return b"".join(parts)
        size += len(piece)
        if size > cap:
            raise ReadBoundError(f"over {_size(cap)}: not read")
        parts.append(piece)


def _size(n: int) -> str:
    return f"{n // (1024 * 1024)} MiB" if n >= 1024 * 1024 else f"{n // 1024} KiB"
