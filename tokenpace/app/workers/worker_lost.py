"""The parent's end of one worker process: its messages, and what it leaves when it dies (its
requests in flight and not yet sent, kept as records with the reason: nothing measured is lost)."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
from collections.abc import Callable, Iterator
from multiprocessing.connection import Connection
from time import perf_counter_ns
from typing import Any

from tokenpace.app.bench.bench import new_record
from tokenpace.app.run.bench_config import BenchConfig
from tokenpace.app.watch.preflight import PreflightError
from tokenpace.app.workers.worker_health import WorkerHealth
from tokenpace.app.workers.worker_pipe import FrameReader, FrameWriter
from tokenpace.app.workers.worker_proc import WorkerDone, WorkerSpec
from tokenpace.core.record import RequestRecord, Status


class WorkerLink:
    def __init__(
        self,
        spec: WorkerSpec,
        process: Any,
        conn: Connection | socket.socket,
        loop: asyncio.AbstractEventLoop,
        on_record: Callable[[WorkerLink, RequestRecord], None],
        reader: FrameReader | None = None,  # one that already read the first frames
    ) -> None:
        self.spec = spec
        self.process = process
        self.conn = conn  # kept open for the fd's lifetime
        self.loop = loop
        self.reader = reader or FrameReader(conn.fileno())
        self.writer = FrameWriter(conn.fileno(), loop)
        self.on_record = on_record
        self.ready: asyncio.Future[None] = loop.create_future()
        self.ended: asyncio.Future[None] = loop.create_future()
        self.inflight: dict[int, RequestRecord] = {}  # sent, not yet ended: index -> record
        self.received: set[int] = set()
        self.chunks = 0
        self.done: WorkerDone | None = None
        self.failure: str | None = None  # its own error text, when it failed
        self.lost: str | None = None  # why it did not finish
        self.clock_id: str | None = None  # its boot id: the same as ours means the same clock
        self.clock_offset_ns = 0  # its clock minus ours, applied to its records (0: one clock)
        self._pong: asyncio.Future[tuple[int, int]] | None = None

    def tell(self, message: tuple[str, Any]) -> None:
        if not self.ended.done():
            with contextlib.suppress(OSError, ValueError):  # it has just gone: reaped later
                self.writer.send(message)

    def on_readable(self) -> None:
        messages = self.reader.read()
        if messages is None:
            self._ended()
            return
        for kind, value in messages:
            self._handle(kind, value)

    def _handle(self, kind: str, value: Any) -> None:
        if kind == "record":
            if self.clock_offset_ns:
                shift_clock(value, -self.clock_offset_ns)
            self.inflight.pop(value.index, None)
            self.received.add(value.index)
            self.chunks += len(value.token_ns)
            self.on_record(self, value)
        elif kind == "sent":
            if self.clock_offset_ns:
                shift_clock(value, -self.clock_offset_ns)
            self.inflight[value.index] = value
        elif kind == "pong":
            if self._pong is not None and not self._pong.done():
                self._pong.set_result(value)
        elif kind == "ready":
            self.clock_id = value
            self._resolve(self.ready)
        elif kind == "done":
            self.done = value
        elif kind == "failed":
            self.failure = value
            if not self.ready.done():  # it could not even start: the run is refused
                problem = f"worker {self.spec.worker} could not start: {value}"
                self.ready.set_exception(WorkerStartError(problem))

    async def measure_clock(self, samples: int = 16) -> tuple[int, int]:
        """(offset, error) in ns of the worker's clock against ours, NTP-style: the ping with the
        shortest round trip; the worker read its clock somewhere in it, so half of it bounds the error."""
        best: tuple[int, int] | None = None
        for _ in range(samples):
            self._pong = self.loop.create_future()
            asked = perf_counter_ns()
            self.tell(("ping", asked))
            try:
                _, theirs = await asyncio.wait_for(self._pong, timeout=5.0)
            except asyncio.TimeoutError:
                break
            answered = perf_counter_ns()
            rtt = answered - asked
            if best is None or rtt < best[1] * 2:
                best = (theirs - (asked + answered) // 2, rtt // 2)
        return best if best is not None else (0, -1)

    def _ended(self) -> None:
        with contextlib.suppress(ValueError, OSError):
            self.loop.remove_reader(self.conn.fileno())
            self.loop.remove_writer(self.conn.fileno())
        if not self.ready.done():
            problem = f"worker {self.spec.worker} exited before it was ready"
            self.ready.set_exception(WorkerStartError(problem))
        self._resolve(self.ended)

    @staticmethod
    def _resolve(future: asyncio.Future[None]) -> None:
        if not future.done():
            future.set_result(None)

    def close(self) -> None:
        if not self.ended.done():
            self._ended()
        self.conn.close()

    def note_exit(self) -> None:
        """After the process was joined: why it did not report, if it did not."""
        if self.done is not None:
            return
        if self.failure:
            self.lost = f"failed ({self.failure})"
            return
        ray_text = getattr(self.process, "exit_text", None)  # a Ray actor says why it ended
        code = self.process.exitcode
        if ray_text is not None:
            self.lost = f"died ({ray_text()})"
        elif code is not None and code < 0:
            self.lost = f"died (killed by {signal.Signals(-code).name})"
        else:
            self.lost = f"died (exit code {code})"

    def health(self) -> WorkerHealth:
        return WorkerHealth(
            self.spec.worker,
            self.process.pid,
            self.done.core if self.done else self.spec.core,
            len(self.received),
            self.chunks,
            self.done.health if self.done else None,
            self.lost,
        )


class WorkerStartError(PreflightError):
    """A worker process could not connect or build its workload before any load."""


def lost_records(
    cfg: BenchConfig, link: WorkerLink, planned: list[int] | None, workload: Any, prefix: str, t0: int
) -> Iterator[RequestRecord]:
    """A dead worker's requests: those in flight end now, cancelled with the reason; those it was
    dealt and never sent (``planned``: None when not known) are kept as never sent."""
    now = perf_counter_ns()
    w = link.spec.worker
    for record in link.inflight.values():
        record.end_ns = now
        record.status = Status.CANCELLED
        record.error = f"lost: worker {w} {link.lost} while this request was in flight"
        yield record
    missing = sorted(set(planned or ()) - link.received - set(link.inflight))
    if not missing:
        return
    offsets = dict(zip(range(w, 1 << 62, link.spec.workers), link.spec.offsets or (), strict=False))
    wanted = set(missing)
    for item in workload.items():
        if item.index > missing[-1]:
            break
        if item.index not in wanted:
            continue
        record = new_record(cfg, item, prefix)
        if item.index in offsets:
            record.scheduled_ns = t0 + int(offsets[item.index] * 1e9)
        record.end_ns = now
        record.status = Status.CANCELLED
        record.error = f"not sent: worker {w} {link.lost} before sending it"
        yield record


# Absolute timestamps of a record (the rest are durations or counts).
_INSTANTS = ("scheduled_ns", "dispatched_ns", "sent_ns", "first_sent_ns", "request_ns", "headers_ns",
             "first_token_ns", "first_answer_ns", "end_ns")  # fmt: skip


def shift_clock(record: RequestRecord, delta_ns: int) -> None:
    """Move a record measured on another machine's clock onto ours (latencies are unchanged)."""
    for name in _INSTANTS:
        value = getattr(record, name)
        if value:
            setattr(record, name, value + delta_ns)
    record.token_ns = [t + delta_ns for t in record.token_ns]
