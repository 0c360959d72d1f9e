"""The record sink's batching: a burst shares one write, and closing never waits out the linger."""

from __future__ import annotations

import asyncio

from tokenpace.core.record import RequestRecord
from tokenpace.gateway.sink import RecordSink


def test_records_arriving_within_the_linger_share_one_write() -> None:
    writes: list[int] = []

    async def main() -> RecordSink:
        sink = RecordSink(lambda batch: writes.append(len(batch)), linger_s=2.0)
        sink.start()
        for i in range(20):  # a request ending every few ms: one transaction, not twenty
            sink.put(RequestRecord(f"r{i}"))
            await asyncio.sleep(0.001)
        await asyncio.sleep(3.0)  # the linger ends: written without any close
        written_before_close = sink.written
        await sink.close(5.0)
        assert written_before_close == 20
        return sink

    sink = asyncio.run(main())
    assert writes == [20] and sink.dropped == 0


def test_close_ends_a_linger_at_once_and_writes_everything() -> None:
    async def main() -> tuple[RecordSink, bool]:
        sink = RecordSink(lambda batch: None, linger_s=3600.0)  # an hour: close must not wait it out
        sink.start()
        for i in range(5):
            sink.put(RequestRecord(f"r{i}"))
        await asyncio.sleep(0.05)  # the writer task is lingering now
        await asyncio.wait_for(sink.close(30.0), 60.0)
        return sink, True

    sink, closed = asyncio.run(main())
    assert closed and sink.written == 5 and sink.dropped == 0
