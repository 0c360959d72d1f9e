"""The bench client against hostile wire behaviour, each beside a healthy stream that stays ok:
compression bombs, a compressed stream, a request read and dropped on a reused connection."""

from __future__ import annotations

import asyncio
import resource

from tokenpace.client import Sender
from tokenpace.core.record import RequestRecord, Status
from tokenpace.testing.wire_upstream import WireUpstream
from tokenpace.wire.dialects import get_dialect
from tokenpace.wire.dialects.base import Sampling
from tokenpace.wire.endpoint import parse_endpoint

PEAK_RSS_GROWTH_MB = 48  # a bomb inflated whole would add at least 64 MB (one read's output)


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def _send(url: str, model: str, stream: bool) -> RequestRecord:
    s = Sender(parse_endpoint(url), get_dialect("chat"), model, Sampling(), stream, 10.0)
    r = RequestRecord(model)
    await s.send(r, s.prepare("a", 4, model))
    await s.close()
    return r


def test_compression_bombs_are_protocol_errors_beside_a_healthy_stream() -> None:
    async def go() -> list[RequestRecord]:
        async with WireUpstream() as up:
            return await asyncio.gather(  # type: ignore[return-value]
                _send(up.url, "bomb-sse", True),
                _send(up.url, "bomb-json", False),
                _send(up.url, "healthy", True),
                _send(up.url, "gzip", True),
            )

    before = _peak_rss_mb()
    sse, json, healthy, packed = asyncio.run(asyncio.wait_for(go(), 30))
    assert sse.status is Status.PROTOCOL_ERROR and sse.error == "compressed body inflates past 64 MiB"
    assert json.status is Status.PROTOCOL_ERROR and "inflates past 16 MiB" in (json.error or "")
    for ok in (healthy, packed):  # a compressed stream is measured like a plain one
        assert ok.status is Status.OK, ok.error
        assert len(ok.token_ns) == 2
    assert _peak_rss_mb() - before < PEAK_RSS_GROWTH_MB


def test_a_request_read_and_dropped_on_a_reused_connection_is_sent_once() -> None:
    async def go() -> tuple[list[RequestRecord], int]:
        async with WireUpstream() as up:
            s = Sender(parse_endpoint(up.url), get_dialect("chat"), "read-drop", Sampling(), True, 5.0)
            records = []
            for i in range(3):
                r = RequestRecord(str(i))
                await s.send(r, s.prepare("a", 2, str(i)))
                await asyncio.sleep(0.02)
                records.append(r)
            await s.close()
            return records, up.read["read-drop"]

    records, read = asyncio.run(asyncio.wait_for(go(), 10))
    assert [r.status for r in records] == [Status.OK, Status.STREAM_INTERRUPTED, Status.OK]
    assert "not resent" in (records[1].error or "")
    assert read == 3  # each request read once by the upstream
