"""What a load shape may use of a run in progress: send a request (kept as a record whatever
happens to it), see whether the run is stopping, hand over the tasks it starts so that ``stop()``
cancels them, and wait for the warm-up. The load shapes (``app.load_shapes``, ``app.sessions``)
use only this surface; ``BenchRun`` owns one per run."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from time import perf_counter_ns
from typing import TYPE_CHECKING, Any

from tokenpace.app.run.answers import answer_text
from tokenpace.app.run.outputs import USER_STOP
from tokenpace.core.credentials import scrub_secrets
from tokenpace.core.record import RequestRecord, Status

if TYPE_CHECKING:
    from tokenpace.app.run.bench_config import BenchConfig
    from tokenpace.client import Sender

# A run stops by itself when this many requests in a row could not even connect.
MAX_CONSECUTIVE_CONNECT_ERRORS = 50


class RunContext:
    def __init__(
        self,
        config: BenchConfig,
        on_record: Callable[[RequestRecord], None] | None,
        warmup: int | None = None,  # a worker process waits only for its own share of the warm-up
    ) -> None:
        self.config = config
        self.on_record = on_record
        self.records: list[RequestRecord] = []
        self.total_planned = (config.requests + config.warmup) if config.requests else None
        self.sender: Sender | None = None  # set by the run once it has connected
        self.stop_reason = ""
        # generated text per request id, only with config.keep_texts (bounded by the run's requests
        # times their max_tokens, as the records are)
        self.texts: dict[str, str] = {}
        self.interrupted = False
        self.secrets: tuple[str, ...] = ()  # credentials sent: scrubbed from error texts kept
        self._consecutive_connect_errors = 0
        self._inflight: set[asyncio.Future[Any]] = set()
        # closed loop: measured requests wait until the warm-up ones are done
        self._warm_pending = config.warmup if warmup is None else warmup
        self._warm_done = asyncio.Event()
        # Plain attributes, not properties over the events: a closed loop reads both before every
        # request (at 256 streams, 256 times at each wave boundary).
        self.stopping = False  # stop() was called
        self.warm = False  # the warm-up is over (or the run stops): no request need wait for it
        if self._warm_pending == 0:
            self._set_warm()

    # --- stopping ---
    def stop(self, reason: str = USER_STOP) -> None:
        if not self.stopping:
            self.stopping = True
            self.interrupted = reason.startswith("interrupted")
            self.stop_reason = reason
            self._set_warm()
            for task in list(self._inflight):
                task.cancel()

    def client_failed(self, exc: BaseException) -> None:
        """An unexpected error in the client's own code: stop loudly rather than lose a user."""
        self.stop(f"aborted: client error ({type(exc).__name__}: {exc})")

    # --- tasks ---
    def track(self, task: asyncio.Future[Any]) -> None:
        """A task of the load shape: ``stop()`` cancels it; ``drain()`` waits for it."""
        self._inflight.add(task)
        task.add_done_callback(self._inflight.discard)

    async def drain(self) -> None:
        """Wait until every tracked task has ended (requests in flight finish or are cancelled)."""
        while self._inflight:
            await asyncio.gather(*list(self._inflight), return_exceptions=True)

    async def warmed_up(self) -> None:
        """Returns once the warm-up requests are done (or the run stops); ``warm`` says so at once."""
        await self._warm_done.wait()

    def _set_warm(self) -> None:
        self.warm = True
        self._warm_done.set()

    # --- requests ---
    async def send(self, record: RequestRecord, payload: bytes, capture: list[bytes] | None = None) -> None:
        self.records.append(record)  # before sending: a cancelled request is still a record
        if self.config.keep_texts and capture is None:  # vLLM's --save-detailed: generated_texts
            capture = []
        try:
            await self.sender.send(record, payload, capture)  # type: ignore[union-attr]
        finally:
            if record.end_ns is None:  # cancelled before the client could mark it
                record.end_ns = perf_counter_ns()
                record.status = Status.CANCELLED
                record.error = "cancelled by the user"
            if record.status is Status.CANCELLED and self.stop_reason not in ("", USER_STOP):
                record.error = f"cancelled: the run was {self.stop_reason}"  # not the user's doing
            if self.config.keep_texts and capture is not None and not record.warmup:
                self.texts[record.request_id] = answer_text(capture)
            self._after(record)

    def not_sent(self, record: RequestRecord, reason: str) -> None:
        """A scheduled request that never went out: kept as a record, not counted as sent."""
        record.end_ns = perf_counter_ns()
        record.status = Status.CANCELLED
        record.error = reason
        self.records.append(record)
        self._after(record)

    def _after(self, record: RequestRecord) -> None:
        if record.error:  # a server may echo the key back in its error text: never keep it
            record.error = scrub_secrets(record.error, self.secrets)
        if record.status is Status.CONNECT_ERROR:
            self._consecutive_connect_errors += 1
            if self._consecutive_connect_errors >= MAX_CONSECUTIVE_CONNECT_ERRORS:
                self.stop(
                    f"aborted: {MAX_CONSECUTIVE_CONNECT_ERRORS} requests in a row could not "
                    f"connect ({record.error})"
                )
        else:
            self._consecutive_connect_errors = 0
        if record.warmup and self._warm_pending > 0:
            self._warm_pending -= 1
            if self._warm_pending == 0:
                self._set_warm()
        if self.on_record is not None:
            try:
                self.on_record(record)
            except Exception as exc:  # e.g. the records file's disk is full: stop, keep what we have
                self.stop(f"aborted: could not save a record ({exc})")
