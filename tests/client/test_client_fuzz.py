"""The bench client's fuzzer (issue 38): hypothesis draws hostile servers (tokenpace.testing.fuzz_peers:
bytes per HTTP chunk down to one, BOMs, CR-only line ends, comment floods, padded events, gzip,
cuts) and the client sends to one beside healthy requests to the same server. Every request ends
recorded (ok, or a failure with its reason), nothing raises, the healthy ones are measured whole,
and the process's peak RSS growth stays bounded. A short budget (a few examples, no deadline: two
busy cores) runs here."""

from __future__ import annotations

import asyncio
import resource

import pytest

hypothesis = pytest.importorskip("hypothesis")
import fuzz_strategies  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402

from tokenpace.client import Sender  # noqa: E402
from tokenpace.core.record import RequestRecord, Status  # noqa: E402
from tokenpace.testing.fuzz_peers import HEALTHY, HEALTHY_MODEL, FuzzUpstream, Peer  # noqa: E402
from tokenpace.wire.dialects import get_dialect  # noqa: E402
from tokenpace.wire.dialects.base import Sampling  # noqa: E402
from tokenpace.wire.endpoint import parse_endpoint  # noqa: E402

SHORT = settings(
    max_examples=10, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck), database=None
)
RSS_GROWTH_BOUND_MB = 64  # the whole fuzz run in this process (server and client)

peers = fuzz_strategies.peers([0, 1, 100, 5000, 70_000, 2_000_000])  # 2 MB: an event past the 1 MiB bound


async def _send(url: str, model: str) -> RequestRecord:
    """One request for ``model`` (the server plays that peer) on a client of its own."""
    sender = Sender(parse_endpoint(url), get_dialect("chat"), model, Sampling(), True, 5.0)
    record = RequestRecord(model)
    try:
        await sender.send(record, sender.prepare("hello", 16, model))
    finally:
        await sender.close()
    return record


@SHORT
@given(peer=peers)
def test_the_client_against_a_drawn_hostile_server(peer: Peer) -> None:
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    async def main() -> tuple[RequestRecord, list[RequestRecord]]:
        async with FuzzUpstream() as up:
            up.peers["fuzz"] = peer
            hostile, *healthy = await asyncio.gather(
                _send(up.url, "fuzz"), *(_send(up.url, HEALTHY_MODEL) for _ in range(3))
            )
            return hostile, healthy

    hostile, healthy = asyncio.run(asyncio.wait_for(main(), 60))
    for ok in healthy:  # beside it, measured whole
        assert ok.status is Status.OK, ok.error
        assert len(ok.token_ns) == HEALTHY.tokens
    assert hostile.end_ns is not None  # ended, and recorded
    # the whole answer reached the client ([DONE] included, a close after it is no loss), and no
    # event broke the 1 MiB bound: measured ok with every token; else a failure with its reason
    whole = peer.cut_after is None or peer.cut_after >= len(peer.body())
    too_big = peer.tokens > 0 and peer.pad >= 1024 * 1024
    # a peer of tiny HTTP chunks is slowed to the kernel's 10,000 pieces a second: past the 5 s
    # timeout that is a timeout, with its reason
    slow = len(peer.body()) / (sum(peer.chunks) / len(peer.chunks)) > 40_000
    if hostile.status is Status.TIMEOUT and slow:
        assert hostile.error
    elif peer.past_the_end and not too_big:  # bytes after the end of the gzip data: refused
        assert hostile.status is not Status.OK and "after the end" in (hostile.error or ""), hostile.error
    elif whole and not too_big:
        assert hostile.status is Status.OK, (hostile.status, hostile.error)
        assert len(hostile.token_ns) == peer.tokens  # whatever the cuts, BOMs, line ends, gzip
    else:
        assert hostile.status is not Status.OK and hostile.error, hostile.status
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 - rss0
    assert grown < RSS_GROWTH_BOUND_MB
