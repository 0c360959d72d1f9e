"""Records leave the hot path through a bounded queue; a writer task stores them in batches.

The proxy never waits on its own bookkeeping: when the queue is full the record is dropped and
counted (``tokenpace_gateway_records_dropped_total``; events apart, see RecordSink), and the
writing itself runs in a daemon thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import queue
import stat
import threading
from collections import deque
from collections.abc import Callable
from pathlib import Path

from tokenpace.adapters.results import record_line
from tokenpace.core.events import OutcomeEvent
from tokenpace.core.record import RequestRecord
from tokenpace.gateway.config.live import LiveChange
from tokenpace.gateway.recording.spool import Spool
from tokenpace.gateway.recording.spool_thread import SpoolThread

# Records, the outcome events reported against them (POST /tokenpace/events) and the config's live
# changes (lifecycle/reload.py) share one writer.
Item = RequestRecord | OutcomeEvent | LiveChange
BatchWriter = Callable[[list[Item]], None]
# A batch waits up to this long for others to share its write (one SQL transaction, one append):
# written at once per record, the writer thread's per-transaction cost took the relay's core away
# often enough to add ~2.5 ms to TTFT P50 at 16 streams. Records are still flushed at shutdown.
LINGER_S = 1.0


def records_in(batch: list[Item]) -> list[RequestRecord]:
    return [r for r in batch if isinstance(r, RequestRecord)]


def jsonl_writer(path: str | Path) -> BatchWriter:
    """Appends one JSON object per record to ``path``, opened anew per batch (rotation-friendly);
    each line is ``record_line``'s, the one serialiser of a record (the client's records file too).

    Opened without blocking: a path since replaced by a FIFO with no reader fails at once (and the
    batch is counted dropped) instead of hanging the writer thread; only a regular file is written.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)

    def write(batch: list[Item]) -> None:  # records only: events live in the store
        data = b"".join(map(record_line, records_in(batch)))
        fd = os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK, 0o644)
        with open(fd, "ab") as fh:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise OSError(f"{target} is not a regular file")
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
    """Two bounded queues, records first: outcome events (which any client may post) wait in their
    own, so a flood of them can drop only events, never a request record. Drops are counted by kind.
    Batches are written in a daemon thread, so a writer hung in ``open()`` (a FIFO, a dead network
    disk) cannot keep the process from exiting: ``close`` waits a bounded time and says what it left.
    """

    def __init__(
        self,
        writer: BatchWriter | None,
        maxsize: int = 10_000,
        batch: int = 500,
        on_drop: Callable[[], None] | None = None,
        events_maxsize: int = 10_000,
        on_event_drop: Callable[[], None] | None = None,
        linger_s: float = LINGER_S,
    ) -> None:
        self.writer = writer
        self.linger_s = linger_s
        # at most ``maxsize`` records, plus the config changes between them (one per change an
        # operator made: never dropped, since the records after one belong to its epoch)
        self.records: deque[RequestRecord | LiveChange] = deque()
        self.events: deque[OutcomeEvent] = deque()  # at most ``events_maxsize``
        self.maxsize = maxsize
        self.events_maxsize = events_maxsize
        self.batch = batch
        self.on_drop = on_drop
        self.on_event_drop = on_event_drop
        self.dropped = 0  # request records not written (queue full, write failed, shutdown)
        self.events_dropped = 0
        self.written = 0
        self.events_written = 0
        self.write_errors = 0
        self._ready = asyncio.Event()
        self._linger: asyncio.Future[None] | None = None  # the wait for others to join a batch
        self._closing = False
        self._idle = asyncio.Event()
        self._idle.set()
        self._task: asyncio.Task[None] | None = None
        self._thread: DaemonWorker | None = None
        # --spool: records on local disk until stored (spool.py), written by its thread (spool_thread.py)
        self.spool: Spool | SpoolThread | None = None

    def _worker(self) -> DaemonWorker:
        if self._thread is None:
            self._thread = DaemonWorker("tokenpace-records")
        return self._thread

    def start(self) -> None:
        if self.writer is not None and self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    def put(self, item: Item) -> None:
        if self.writer is None:
            return
        if isinstance(item, LiveChange):
            self.records.append(item)
        elif isinstance(item, RequestRecord):
            if len(self.records) < self.maxsize:
                self.records.append(item)
                if self.spool is not None:  # handed to the spool's thread, in order (spool_thread.py)
                    self.spool.append(item)
            else:
                self._drop([item])
                return
        elif len(self.events) < self.events_maxsize:
            self.events.append(item)
        else:
            self._drop([item])
            return
        self._idle.clear()
        self._ready.set()

    def _drop(self, items: list[Item]) -> None:
        for item in items:
            if isinstance(item, RequestRecord):
                self.dropped += 1
                if self.on_drop is not None:
                    self.on_drop()
            elif isinstance(item, OutcomeEvent):
                self.events_dropped += 1
                if self.on_event_drop is not None:
                    self.on_event_drop()

    def _take(self) -> list[Item]:
        """Up to ``batch`` items, records first."""
        out: list[Item] = []
        while self.records and len(out) < self.batch:
            out.append(self.records.popleft())
        while self.events and len(out) < self.batch:
            out.append(self.events.popleft())
        return out

    async def _run(self) -> None:
        while True:
            await self._ready.wait()
            self._ready.clear()
            if self.linger_s > 0 and not self._closing and len(self.records) + len(self.events) < self.batch:
                await self._linger_a_while()
            while batch := self._take():
                await self._write(batch)
            self._idle.set()

    async def _linger_a_while(self) -> None:
        """Up to ``linger_s`` for more items to share this write; ``close`` ends it early. A plain
        future, not ``wait_for`` on an event: a cancel arriving as the wait ends is never lost."""
        loop = asyncio.get_running_loop()
        self._linger = linger = loop.create_future()
        timer = loop.call_later(self.linger_s, _settle, linger, None)
        try:
            await linger
        finally:
            timer.cancel()
            self._linger = None

    async def _write(self, batch: list[Item]) -> None:
        assert self.writer is not None
        try:
            await self._store(batch)
        finally:  # stored, or counted dropped: either way no longer the spool's to keep
            if self.spool is not None:
                self.spool.stored(len(records_in(batch)))

    async def _store(self, batch: list[Item]) -> None:
        assert self.writer is not None
        try:
            await self._worker().run(self.writer, batch)
            self.written += len(records_in(batch))  # "records written"; events are counted apart
            self.events_written += sum(isinstance(i, OutcomeEvent) for i in batch)
        except asyncio.CancelledError:  # shutdown gave up on it: it may still land, counted lost
            self._drop(batch)
            raise
        except Exception:  # a failing store must not stop the proxy; the loss is counted
            self.write_errors += 1
            self._drop(batch)

    async def close(self, timeout_s: float = 10.0) -> None:
        """Flush what is queued, the writer's ``finish`` included, within ``timeout_s`` in all.

        A batch handed to the writer thread is not interrupted; past the timeout it is left to its
        daemon thread and counted dropped, with everything still queued, and ``close`` returns.
        """
        if self._task is None:
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        self._closing = True
        if self._linger is not None:
            _settle(self._linger, None)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._idle.wait(), timeout_s)
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self._task = None
        self._drop(self._take_all())
        if self.writer is not None:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(
                    self._worker().run(_finish, self.writer), max(0.0, deadline - loop.time())
                )
        if self._thread is not None:
            self._thread.stop()
            self._thread = None

    def _take_all(self) -> list[Item]:
        items: list[Item] = [*self.records, *self.events]
        self.records.clear()
        self.events.clear()
        return items


class DaemonWorker:
    """One long-lived daemon thread running jobs in order (a thread started per job would make the
    loop wait for the new thread to be scheduled, milliseconds on a busy machine). Being a daemon,
    a job hung in ``open()`` never holds up the interpreter's exit, unlike ``asyncio.to_thread``'s
    pool threads, which are joined at exit."""

    def __init__(self, name: str) -> None:
        self._jobs: queue.SimpleQueue[tuple[Callable[[], None], asyncio.Future[None]] | None]
        self._jobs = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    def run(self, fn: Callable[..., None], *args: object) -> asyncio.Future[None]:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._jobs.put((lambda: fn(*args), future))
        return future

    def stop(self) -> None:
        """The thread ends once the jobs before this one are done (a hung one keeps it, harmlessly)."""
        self._jobs.put(None)

    def _serve(self) -> None:
        while (item := self._jobs.get()) is not None:
            job, future = item
            error: BaseException | None = None
            try:
                job()
            except BaseException as exc:  # handed to the awaiting task
                error = exc
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody waits
                future.get_loop().call_soon_threadsafe(_settle, future, error)


def _settle(future: asyncio.Future[None], error: BaseException | None) -> None:
    if future.done():  # cancelled: shutdown stopped waiting for it
        return
    if error is None:
        future.set_result(None)
    else:
        future.set_exception(error)
