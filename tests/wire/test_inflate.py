"""Bounded incremental decompression: what a compressed body may inflate to, a step at a time."""

from __future__ import annotations

import gzip
import zlib

import pytest

from tokenpace.testing.wire_upstream import gzip_of_repeated
from tokenpace.wire.inflate import STEP_BYTES, InflateError, Inflater


def _pieces(data: bytes, size: int) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


@pytest.mark.parametrize("encoding", ["gzip", "x-gzip", "deflate"])
def test_a_body_split_anywhere_inflates_to_the_same_bytes(encoding: str) -> None:
    plain = b"".join(b'data: {"n":%d}\n\n' % i for i in range(5000))
    packed = gzip.compress(plain) if "gzip" in encoding else zlib.compress(plain)
    inflater = Inflater(encoding, len(plain))  # a cap exactly the size is not passed
    out = [piece for part in _pieces(packed, 7) for piece in inflater.feed(part)]
    assert b"".join(out) == plain


def test_a_bomb_stops_at_the_cap_with_the_reason_never_held_whole() -> None:
    bomb = gzip_of_repeated(b"\0" * 1024, 32 * 1024 * 1024)  # 32 KiB that inflate to 32 MiB
    inflater = Inflater("gzip", 4 * 1024 * 1024)
    largest, total = 0, 0
    with pytest.raises(InflateError, match="compressed body inflates past 4 MiB"):
        for piece in inflater.feed(bomb):  # the whole bomb in one read
            largest, total = max(largest, len(piece)), total + len(piece)
    assert largest <= STEP_BYTES  # held a step at a time
    assert total <= 4 * 1024 * 1024


def test_bytes_that_are_not_compressed_are_refused() -> None:
    with pytest.raises(InflateError, match="undecodable compressed body"):
        list(Inflater("gzip", 1024).feed(b"data: not gzip\n\n"))


@pytest.mark.parametrize("cut", [None, 3, 4096])
def test_bytes_after_the_end_of_the_compressed_data_are_refused_not_kept(cut: int | None) -> None:
    """Issue 49, item 3: zlib keeps what follows the end of the compressed stream (unused_data),
    outside any cap: 185-293 MB piled up behind one upstream. Now the first byte past the end is
    refused, in the read that ends the stream or in any later one, and nothing of it is kept."""
    plain = b"".join(b'data: {"n":%d}\n\n' % i for i in range(500))
    body = gzip.compress(plain) + b"\0" * 100_000  # the end of the gzip data, then more
    inflater = Inflater("gzip", 1024 * 1024)
    out: list[bytes] = []
    with pytest.raises(InflateError, match="data after the end of the compressed body"):
        for part in _pieces(body, cut or len(body)):
            out.extend(inflater.feed(part))
    assert len(b"".join(out)) <= len(plain)
    assert len(inflater._z.unused_data) <= (cut or len(body))  # at most the read that held the end
