"""The record sink's batching: a burst shares one write, and closing never waits out the linger;
the records file's lines are the one record serialiser's (``record_line``), keys as ``to_dict``'s."""

from __future__ import annotations

import asyncio
from pathlib import Path

import orjson

from tokenpace.adapters.results import read_records
from tokenpace.core.events import OutcomeEvent
from tokenpace.core.record import RequestRecord, Status
from tokenpace.gateway.recording.sink import RecordSink, jsonl_writer


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


def _gateway_records() -> list[RequestRecord]:
    """Records shaped as the gateway makes them: an arm label, a trace, a prompt's shape, a failure."""
    ok = RequestRecord("gw-1", labels={"arm": "live", "model": "m", "region": "eu"}, trace_id="a" * 32)
    ok.span_id, ok.parent_span_id, ok.prompt_chars, ok.prefix_hashes = "b" * 16, "c" * 16, 40, [2**63 - 1]
    ok.sent_ns, ok.first_token_ns, ok.end_ns, ok.token_ns = 1, 2, 9, [2, 5]
    ok.output_tokens_counted, ok.output_tokens_server, ok.finish_reason = 2, 2, "stop"
    failed = RequestRecord("gw-2", labels={"arm": ""}, status=Status.PROTOCOL_ERROR, error="KeyError")
    return [ok, failed]


def test_the_records_file_has_one_line_per_record_as_to_dict_gives_it(tmp_path: Path) -> None:
    path = tmp_path / "gw" / "records.jsonl"
    write = jsonl_writer(path)
    event = OutcomeEvent(event="accepted", arm="live", unix_s=1.0, request_id="gw-1")
    write([*_gateway_records(), event])  # events live in the store, not in this file
    lines = path.read_bytes().splitlines(keepends=True)
    assert lines == [orjson.dumps(r.to_dict()) + b"\n" for r in _gateway_records()]
    assert read_records(path) == _gateway_records()
