"""Records leave the hot path through a bounded queue; a writer task stores them in batches.

The proxy never waits on its own bookkeeping: when the queue is full the record is dropped and
counted (``tokenpace_gateway_records_dropped_total``), and the writing itself runs in a thread.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from pathlib import Path

import orjson

from tokenpace.core.events import OutcomeEvent
from tokenpace.core.record import RequestRecord

# Records, and the outcome events reported against them (POST /tokenpace/events), share one queue.
Item = RequestRecord | OutcomeEvent
BatchWriter = Callable[[list[Item]], None]


def records_in(batch: list[Item]) -> list[RequestRecord]:
    return [r for r in batch if isinstance(r, RequestRecord)]


def jsonl_writer(path: str | Path) -> BatchWriter:
    """Appends one JSON object per record to ``path``."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)

    def write(batch: list[Item]) -> None:  # records only: events live in the store
        data = b"".join(orjson.dumps(r.to_dict()) + b"\n" for r in records_in(batch))
        with target.open("ab") as fh:
            fh.write(data)

    return write


def fan_out(*writers: BatchWriter | None) -> BatchWriter | None:
    """One BatchWriter calling each of ``writers``; every one is tried, the first failure re-raised."""
    live = [w for w in writers if w is not None]
    if not live:
        return None
    if len(live) == 1:
        return live[0]

    def write(batch: list[Item]) -> None:
        error: Exception | None = None
        for w in live:
            try:
                w(batch)
            except Exception as exc:  # the sink counts the loss
                error = error or exc
        if error is not None:
            raise error

    def finish() -> None:
        for w in live:
            _finish(w)

    write.finish = finish  # type: ignore[attr-defined]
    return write


def _finish(writer: BatchWriter) -> None:
    """A writer may have a ``finish()`` (run once after the last batch, e.g. a run's summary)."""
    finish = getattr(writer, "finish", None)
    if callable(finish):
        with contextlib.suppress(Exception):
            finish()


class RecordSink:
    def __init__(
        self,
        writer: BatchWriter | None,
        maxsize: int = 10_000,
        batch: int = 500,
        on_drop: Callable[[], None] | None = None,
    ) -> None:
        self.writer = writer
        self.queue: asyncio.Queue[Item] = asyncio.Queue(maxsize)
        self.batch = batch
        self.on_drop = on_drop
        self.dropped = 0
        self.written = 0
        self.events_written = 0
        self.write_errors = 0
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self.writer is not None and self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    def put(self, rec: Item) -> None:
        if self.writer is None:
            return
        try:
            self.queue.put_nowait(rec)
        except asyncio.QueueFull:
            self.dropped += 1
            if self.on_drop is not None:
                self.on_drop()

    async def _run(self) -> None:
        assert self.writer is not None
        while True:
            batch = [await self.queue.get()]
            while len(batch) < self.batch and not self.queue.empty():
                batch.append(self.queue.get_nowait())
            try:
                await self._write(batch)
            finally:
                for _ in batch:
                    self.queue.task_done()

    async def _write(self, batch: list[Item]) -> None:
        assert self.writer is not None
        try:
            await asyncio.to_thread(self.writer, batch)
            self.written += len(records_in(batch))  # "records written"; events are counted apart
            self.events_written += len(batch) - len(records_in(batch))
        except Exception:  # a failing store must not stop the proxy; the loss is counted
            self.write_errors += 1
            self.dropped += len(batch)
            if self.on_drop is not None:
                for _ in batch:
                    self.on_drop()

    async def close(self, timeout_s: float = 30.0) -> None:
        """Flush what is queued (waiting up to ``timeout_s``), then stop the writer.

        The writer is never cancelled mid-batch: a batch handed to its thread is finished and
        counted, and no second write starts beside it. What is still queued after the timeout is
        dropped and counted.
        """
        if self._task is None:
            return
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self.queue.join(), timeout_s)
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self._task = None
        while not self.queue.empty():
            self.queue.get_nowait()
            self.dropped += 1
            if self.on_drop is not None:
                self.on_drop()
        if self.writer is not None:
            await asyncio.to_thread(_finish, self.writer)
