"""A run's figures so far, published while it goes: to the store (its ``live_runs`` row, for the web
console) and to whoever shows the run (the terminal's live line).

Off the hot path: a record is only appended to a pending list on the event loop (O(1)); once every
``PUBLISH_S`` a timer on the loop hands the pending records to one worker thread, which folds them
into ``live_figures`` and writes the store. At most one fold is in flight: a timer that finds
the last one still running leaves its records for the next. Bounds: ``MAX_PENDING`` records wait
between two folds (past it they are counted in the figures' ``skipped``, not folded); the snapshot
is bounded by ``live_figures``. A store that fails is not written again for this run (the run
itself goes on; the problem is kept in ``problem``). ``finish`` publishes the final figures and
state, also when the run was stopped by Ctrl-C or failed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from tokenpace.core.analysis.diagnosis.live_figures import ClientNow, LiveFigures, LiveSnapshot
from tokenpace.core.record import RequestRecord

if TYPE_CHECKING:  # imported when used: --no-store runs never load SQLAlchemy
    from tokenpace.adapters.store import Store

PUBLISH_S = 1.0  # at most one fold and store write a second
MAX_PENDING = 100_000  # records waiting for the next fold; past it counted, not folded


@runtime_checkable
class LiveView(Protocol):
    """A progress display that also shows the figures so far (called on the run's event loop)."""

    def live(self, snapshot: LiveSnapshot) -> None: ...


class LiveFeed:
    """One run's live figures. ``record`` on every ended record, ``start`` on the run's loop before
    load, ``finish`` once at the end (from the loop or after it)."""

    def __init__(
        self,
        run_id: str,
        kind: str,
        store: Store | None,
        labels: Mapping[str, str],
        show: Callable[[LiveSnapshot], None] | None = None,
        sent: Callable[[], int] | None = None,
    ) -> None:
        self.run_id, self.kind, self.store, self.labels = run_id, kind, store, dict(labels)
        self.show = show
        self.sent = sent  # requests sent so far (warm-up included): in flight = sent - ended
        self.figures = LiveFigures()
        self.pending: list[RequestRecord] = []
        self.ended = 0
        self.skipped = 0
        self.problem: str | None = None  # why the store is no longer written
        self.latest: LiveSnapshot | None = None
        self.t0 = time.monotonic()
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tokenpace-live")
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ticker: asyncio.Task[None] | None = None
        self._busy = False
        self._finished = False

    def record(self, record: RequestRecord) -> None:
        self.ended += 1
        if len(self.pending) < MAX_PENDING:
            self.pending.append(record)
        else:
            self.skipped += 1

    def start(self) -> None:
        """On the run's event loop: the store's row (in the worker thread) and the timer."""
        self._loop = asyncio.get_running_loop()
        self.t0 = time.monotonic()
        if self.store is not None:
            self._pool.submit(self._guarded, self.store.start_live, self.run_id, self.kind, self.labels)
        self._ticker = self._loop.create_task(self._tick())

    async def _tick(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            due = loop.time() + PUBLISH_S
            await asyncio.sleep(PUBLISH_S)
            lag_ms = max(0.0, (loop.time() - due) * 1000)
            if not self._busy:  # the last fold still runs: its records wait for the next tick
                self._submit(ClientNow(self._in_flight(), lag_ms), "running", False)

    def _in_flight(self) -> int | None:
        return None if self.sent is None else max(0, self.sent() - self.ended)

    def _submit(self, client: ClientNow, state: str, ended: bool) -> Future[LiveSnapshot]:
        batch, self.pending = self.pending, []
        elapsed = time.monotonic() - self.t0
        self._busy = True
        done = self._pool.submit(self._fold, batch, elapsed, client, time.perf_counter_ns(), state, ended)
        done.add_done_callback(self._folded)
        return done

    def _fold(
        self,
        batch: list[RequestRecord],
        elapsed: float,
        client: ClientNow,
        now_ns: int,
        state: str,
        ended: bool,
    ) -> LiveSnapshot:
        """In the worker thread: the figures, then the store."""
        snapshot = self.figures.fold(batch, elapsed, client, now_ns)
        if self.store is not None:
            figures: dict[str, Any] = snapshot.to_dict() | {"skipped": self.skipped}
            self._guarded(self.store.publish_live, self.run_id, figures, state, ended)
        return snapshot

    def _guarded(self, write: Callable[..., None], *args: Any) -> None:
        from tokenpace.adapters.store import StoreError

        if self.problem is not None:
            return
        try:
            write(*args)
        except StoreError as exc:  # the run goes on; its result is stored at the end as always
            self.problem = str(exc)

    def _folded(self, done: Future[LiveSnapshot]) -> None:
        """In the worker thread: hand the snapshot to the loop (the display lives there)."""
        if done.cancelled() or done.exception() is not None:
            self._busy = False
            return
        snapshot = done.result()
        loop = self._loop
        if loop is None or loop.is_closed():
            self._busy = False
            return
        try:
            loop.call_soon_threadsafe(self._shown, snapshot)
        except RuntimeError:  # the loop closed meanwhile
            self._busy = False

    def _shown(self, snapshot: LiveSnapshot) -> None:
        self._busy = False
        self.latest = snapshot
        if self.show is not None and not self._finished:
            self.show(snapshot)

    def finish(self, state: str) -> Future[LiveSnapshot] | None:
        """The run ended (``state``: completed, interrupted ..., aborted ..., failed ...): the timer
        stops and the final figures go out after any fold in flight. The worker thread ends once
        they are written (the interpreter waits for it at exit: at most the store's own timeout)."""
        if self._finished:
            return None
        self._finished = True
        if self._ticker is not None:
            self._ticker.cancel()
        done = self._submit(ClientNow(self._in_flight(), None), state, True)
        self._pool.shutdown(wait=False)
        return done
