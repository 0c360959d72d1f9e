"""--spool (spool.py): what a killed process left unstored is found by the next one, and nothing it
stored; files are removed as the writer handles their records; a torn line is counted, not fatal;
through the sink, a record is on disk before the writer's batch and gone once stored."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from baseline_fixtures import make_record

from tokenpace.core.record import RequestRecord
from tokenpace.gateway.recording import spool as spool_module
from tokenpace.gateway.recording.sink import Item, RecordSink
from tokenpace.gateway.recording.spool import Spool


def _records(n: int, start: int = 0) -> list[RequestRecord]:
    return [make_record(i, 100.0) for i in range(start, start + n)]


def _ids(records: list[RequestRecord]) -> list[str]:
    return [r.request_id for r in records]


def test_a_killed_process_leaves_only_what_it_did_not_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(spool_module, "SEGMENT_RECORDS", 3)
    sent = _records(8)
    first = Spool(tmp_path)
    assert first.leftovers() == []
    for r in sent:
        first.append(r)
    first.stored(4)  # the first file (records 0-2) is all stored: removed
    assert len(list(tmp_path.glob("spool-*"))) == 2
    # killed here: no close. The next process finds records 4..7 only
    second = Spool(tmp_path)
    left = second.leftovers()
    assert _ids(left) == _ids(sent[4:]) and second.replayed == 4
    for r in left:  # the sink spools them again, then the old files go
        second.append(r)
    second.discard_leftovers()
    second.stored(4)
    second.close()
    assert list(tmp_path.iterdir()) == []
    assert Spool(tmp_path).leftovers() == []


def test_all_stored_leaves_nothing_and_a_torn_line_is_counted(tmp_path: Path) -> None:
    s = Spool(tmp_path)
    for r in _records(3):
        s.append(r)
    s.stored(3)
    assert not list(tmp_path.glob("spool-*")) and s.bytes == 0
    for r in _records(2, 3):
        s.append(r)
    (path,) = tmp_path.glob("spool-*")
    with path.open("ab") as fh:
        fh.write(b'{"request_id": "torn", "sent')  # a line a failing host cut short
    again = Spool(tmp_path)
    assert _ids(again.leftovers()) == _ids(_records(2, 3)) and again.unreadable == 1


def test_through_the_sink_on_disk_until_stored(tmp_path: Path) -> None:
    written: list[Item] = []
    seen_on_disk: list[int] = []

    def writer(batch: list[Item]) -> None:
        seen_on_disk.append(len(Spool(tmp_path).leftovers()))  # what a kill now would leave
        written.extend(batch)

    async def main() -> None:
        sink = RecordSink(writer, linger_s=0.0)
        sink.spool = Spool(tmp_path)
        sink.start()
        for r in _records(5):
            sink.put(r)
        await sink.close(5.0)
        sink.spool.close()

    asyncio.run(main())
    assert len(written) == 5 and seen_on_disk == [5]
    assert list(tmp_path.iterdir()) == []
