"""spool_thread.py: the spool's disk work is off the loop. A disk that stalls holds up neither the
sink nor the store's writer; what the thread then writes is exactly what a spool written in the
loop holds (indices, the handled mark, files removed once stored); past its bound a record is
counted, not spooled, and still stored."""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path

import pytest
from baseline_fixtures import make_record

from tokenpace.core.record import RequestRecord
from tokenpace.gateway.recording import spool as spool_module
from tokenpace.gateway.recording import spool_thread as spool_thread_module
from tokenpace.gateway.recording.sink import Item, RecordSink
from tokenpace.gateway.recording.spool import Spool
from tokenpace.gateway.recording.spool_thread import SpoolThread


def _records(n: int, start: int = 0) -> list[RequestRecord]:
    return [make_record(i, 100.0) for i in range(start, start + n)]


def _stalled_disk(monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """Every spool write waits for the returned event (a disk that stalls)."""
    release = threading.Event()
    real_write = os.write

    def write(fd: int, data: bytes) -> int:
        release.wait(30)
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", write)  # the spool calls os.write
    return release


def test_a_stalled_disk_holds_up_neither_the_sink_nor_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    release = _stalled_disk(monkeypatch)
    written: list[Item] = []

    async def main() -> SpoolThread:
        sink = RecordSink(written.extend, linger_s=0.0)
        spool = sink.spool = SpoolThread(Spool(tmp_path))
        sink.start()
        for r in _records(5):
            sink.put(r)  # the thread is stuck in its first write: the loop goes on
        for _ in range(200):  # the store's writer gets them while the disk is stalled
            if len(written) == 5:
                break
            await asyncio.sleep(0.01)
        assert len(written) == 5 and spool.pending >= 4
        release.set()
        await sink.close(5.0)
        return spool

    spool = asyncio.run(main())
    spool.close(10.0)
    assert spool.left_unwritten == 0 and spool.skipped == 0
    assert list(tmp_path.iterdir()) == []  # all stored, so nothing kept


def test_a_kill_leaves_what_a_spool_in_the_loop_would(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(spool_module, "SEGMENT_RECORDS", 3)
    sent = _records(8)
    spool = SpoolThread(Spool(tmp_path))
    for r in sent:
        spool.append(r)
    spool.stored(4)
    for _ in range(500):  # the thread catches up; no close: "killed" once it has
        if spool.pending == 0 and len(list(tmp_path.glob("spool-*"))) == 2:
            break
        threading.Event().wait(0.01)
    left = Spool(tmp_path).leftovers()
    assert [r.request_id for r in left] == [r.request_id for r in sent[4:]]


def test_past_its_bound_a_record_is_counted_not_spooled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(spool_thread_module, "MAX_PENDING", 3)
    release = _stalled_disk(monkeypatch)
    spool = SpoolThread(Spool(tmp_path))
    for r in _records(8):
        spool.append(r)  # three wait (the first in the stalled write), the rest are past the bound
    release.set()
    spool.stored(8)
    spool.close(10.0)
    assert spool.skipped == 5 and spool.spool.appended == 8 and spool.spool.handled == 8
    assert list(tmp_path.iterdir()) == []


def test_leftovers_are_discarded_only_after_they_are_spooled_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = Spool(tmp_path)
    for r in _records(3):
        first.append(r)  # killed with three unstored
    release = _stalled_disk(monkeypatch)
    again = SpoolThread(Spool(tmp_path))
    left = again.leftovers()
    for r in left:
        again.append(r)
    again.discard_leftovers()  # queued behind the stalled writes: the old files stay meanwhile
    assert len(Spool(tmp_path).leftovers()) == 3
    release.set()
    again.close(10.0)  # not stored: the new process's file keeps the three
    assert [r.request_id for r in Spool(tmp_path).leftovers()] == [r.request_id for r in left]
