"""The hostile peers the fuzzers draw (hypothesis strategies), one space for the client's fuzzer and
the gateway's: streams cut down to single bytes, SSE fields of many sizes, BOMs, CR-only lines,
comment floods, compressed layers and bytes after their end (tokenpace.testing.fuzz_peers plays them)."""

from __future__ import annotations

from hypothesis import strategies as st

from tokenpace.testing.fuzz_peers import Peer


def peers(pads: list[int]) -> st.SearchStrategy[Peer]:
    """Peers with an event padding drawn from ``pads`` (the client's fuzzer adds one past 1 MiB)."""
    return st.builds(
        Peer,
        tokens=st.integers(0, 12),
        pad=st.sampled_from(pads),
        bom=st.booleans(),
        line_end=st.sampled_from([b"\n", b"\r\n", b"\r"]),
        comments=st.sampled_from([0, 1, 50, 5000]),
        gzip=st.booleans(),
        chunks=st.lists(st.integers(1, 300), min_size=1, max_size=4).map(tuple),
        cut_after=st.none() | st.integers(0, 4000),
        trailing=st.sampled_from([0, 0, 1, 70_000]),
    )
