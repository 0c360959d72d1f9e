"""Shadow traffic: a copy of live requests (all, or a share sticky by user) sent to a candidate,
whose answer is read to the end, measured, recorded as a shadow arm and thrown away.

The live path never waits for it. ``offer`` is O(1) and never blocks: the copy joins a bounded
queue (``queue`` jobs and ``max_bytes`` of request bodies together) served by ``concurrency`` tasks;
when the candidate is slow or down the queue fills and further copies are dropped and counted
(``tokenpace_gateway_shadow_dropped_total{shadow,reason}``), never delayed into the live path.
Each copy carries ``x-tokenpace-shadow: 1`` (so the candidate's logs can tell it from a user's) and
is sent once: never retried, on a fresh connection when no kept-alive one is idle.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass

from aiohttp import web

from tokenpace.core.credentials import scrub_secrets
from tokenpace.core.record import RequestRecord, Status
from tokenpace.gateway.config.config import GatewayConfig, Upstream, parse_upstream, upstream_pool
from tokenpace.gateway.config.secrets import known_secrets, request_secrets
from tokenpace.gateway.metering.meter import Meter
from tokenpace.gateway.metering.outcome import Outcome, internal_error_text
from tokenpace.wire.connection import HttpConnection
from tokenpace.wire.dialects.base import Dialect
from tokenpace.wire.exchange import BodyReader, Exchange, ExchangeError
from tokenpace.wire.pool import Pool
from tokenpace.wire.request import request_bytes, request_head

SHADOW_HEADER = "x-tokenpace-shadow"
perf_ns = time.perf_counter_ns


@dataclass(frozen=True, slots=True)
class Mirror:
    upstream: Upstream
    share: float = 1.0  # of users (or of requests without a user), chosen by a hash: sticky

    @property
    def name(self) -> str:
        return self.upstream.name


def parse_mirror(text: str) -> Mirror:
    """``NAME=URL[,share=P][,model=M][,version=V]``: the upstream options, and the share mirrored."""
    parts = [p for p in text.split(",") if not p.strip().startswith("share=")]
    shares = [p.strip()[len("share=") :] for p in text.split(",") if p.strip().startswith("share=")]
    upstream = parse_upstream(",".join(parts))
    share = 1.0
    if shares:
        try:
            share = float(shares[-1])
        except ValueError:
            raise ValueError(f"--mirror {upstream.name}: share must be a number in (0, 1]") from None
        if not 0 < share <= 1:
            raise ValueError(f"--mirror {upstream.name}: share must be in (0, 1], not {share}")
    return Mirror(upstream, share)


def mirrored(key: bytes, share: float) -> bool:
    """Whether the user (or request) with this key is in the mirrored share: the same answer for
    the same key every time, so a user's whole session is shadowed or none of it."""
    if share >= 1:
        return True
    bucket = int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "big") / 2**64
    return bucket < share


@dataclass(slots=True)
class ShadowJob:
    mirror: Mirror
    method: str
    target: str  # path and query, as the client sent them
    headers: list[tuple[str, str]]  # the client's, hop-by-hop ones removed
    body: bytes  # the live request's own bytes object: no copy
    live: RequestRecord  # read for its id, labels and prompt shape; never written to
    dialect: Dialect
    content_type: str = ""


class Mirrors:
    """The shadow side of one gateway process: queue, workers, one origin per mirror."""

    def __init__(
        self,
        mirrors: tuple[Mirror, ...],
        emit: Callable[[RequestRecord], None],
        on_drop: Callable[[str, str], None],
        queue: int = 256,
        concurrency: int = 16,
        max_bytes: int = 64 * 1024 * 1024,
        connect_timeout_s: float = 10.0,
        timeout_s: float = 300.0,
    ) -> None:
        self.mirrors = mirrors
        self.emit = emit
        self.on_drop = on_drop
        self.concurrency = concurrency
        self.max_bytes = max_bytes
        self.timeout_s = timeout_s
        self.connect_timeout_s = connect_timeout_s
        self.origins = {m.name: upstream_pool(m.upstream.endpoint) for m in mirrors}
        self._queue: asyncio.Queue[ShadowJob] = asyncio.Queue(queue)
        self._bytes = 0  # request bytes queued or in flight
        self._tasks: list[asyncio.Task[None]] = []
        self.static_labels: dict[str, str] = {}  # the gateway's --label: on shadow records too
        self.secrets: tuple[str, ...] = ()  # the gateway's own, scrubbed from shadow records' errors
        # the config epoch these mirrors serve (a live change sets it): the store keeps shadow
        # records in that epoch's runs, where a mirror added live exists
        self.epoch = "0"

    @classmethod
    def of(
        cls, config: GatewayConfig, emit: Callable[[RequestRecord], None], on_drop: Callable[[str, str], None]
    ) -> Mirrors | None:
        """The mirrors a gateway's configuration asks for; None without ``--mirror``."""
        if not config.mirrors:
            return None
        mirrors = cls(
            config.mirrors,
            emit,
            on_drop,
            config.mirror_queue,
            config.mirror_concurrency,
            config.mirror_max_bytes,
            config.connect_timeout_s,
            config.first_token_timeout_s,
        )
        mirrors.static_labels = config.static_labels
        mirrors.secrets = config.secrets
        return mirrors

    def copy(
        self,
        request: web.Request,
        body: bytes,
        live: RequestRecord,
        dialect: Dialect,
        key: bytes,
        drop_headers: frozenset[str] | set[str],
    ) -> None:
        """Offer a copy of a live request to each mirror whose share holds this key (the user's, or
        the request's): a few list operations, never a wait."""
        chosen = [m for m in self.mirrors if mirrored(key, m.share)]
        if not chosen:
            return
        headers = [(k, v) for k, v in request.headers.items() if k.lower() not in drop_headers]
        target = request.rel_url.raw_path_qs
        for mirror in chosen:
            self.offer(ShadowJob(mirror, request.method, target, headers, body, live, dialect))

    def offer(self, job: ShadowJob) -> None:
        """Queue a copy, or drop it and count why; never waits."""
        size = len(job.body)
        if self._bytes + size > self.max_bytes:
            self.on_drop(job.mirror.name, "memory_budget")
            return
        try:
            self._queue.put_nowait(job)
        except asyncio.QueueFull:
            self.on_drop(job.mirror.name, "queue_full")
            return
        self._bytes += size

    def start(self) -> None:
        self._tasks = [asyncio.create_task(self._worker()) for _ in range(self.concurrency)]

    async def retire(self) -> None:
        """A mirror set replaced by a live change: the copies it holds, queued or in flight, finish
        and are recorded (each bounded by its timeouts, all of them by ``timeout_s``; what is left
        then is dropped as at shutdown, and counted), then it closes. Takes no new copy: the
        gateway already offers them to the set that replaced it."""
        try:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._queue.join(), self.timeout_s)
        finally:  # the gateway stopping meanwhile cancels the wait, never the close
            await self.close()

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        while not self._queue.empty():
            self.on_drop(self._queue.get_nowait().mirror.name, "shutdown")
        for origin in self.origins.values():
            origin.close()

    async def _worker(self) -> None:
        while True:
            job = await self._queue.get()
            try:
                record = await self._shadow(job)
            except asyncio.CancelledError:  # the gateway is closing: this copy is dropped, counted
                self.on_drop(job.mirror.name, "shutdown")
                raise
            finally:
                self._bytes -= len(job.body)
            with contextlib.suppress(Exception):  # bookkeeping must never stop a worker
                self.emit(record)
            self._queue.task_done()

    async def _shadow(self, job: ShadowJob) -> RequestRecord:
        name = job.mirror.name
        up = job.mirror.upstream
        live = job.live
        record = RequestRecord(
            request_id=f"{live.request_id}~{name}"[:300],
            worker=live.worker,
            labels={
                **self.static_labels,
                "model": live.labels.get("model", ""),
                "upstream": name,
                "arm": up.arm,
                **up.labels,
                "shadow": "true",
                "mirror_of": live.request_id,
                "config_epoch": self.epoch,
            },
            prompt_chars=live.prompt_chars,
            prefix_hashes=live.prefix_hashes,
        )
        origin = self.origins[name]
        headers = [(k, v) for k, v in job.headers if k.lower() != "authorization" or up.auth is None]
        if up.auth is not None:
            headers.append(("Authorization", up.auth))
        headers += [(SHADOW_HEADER, "1"), ("x-request-id", record.request_id)]
        head = request_head(job.method, up.base_path + job.target, origin.endpoint.host_header, headers)
        payload = request_bytes(head, job.body)
        conn: HttpConnection | None = None
        record.scheduled_ns = record.dispatched_ns = record.sent_ns = perf_ns()
        try:
            sent, ex = await asyncio.wait_for(
                self._send_once(origin, payload, self.connect_timeout_s), self.timeout_s
            )
            conn = sent
            await asyncio.wait_for(self._read(ex, sent, record, job.dialect), self.timeout_s)
            origin.release(sent)
            conn = None  # kept alive for the next copy
        except asyncio.TimeoutError:
            record.status, record.error = Status.TIMEOUT, f"no complete answer in {self.timeout_s:g}s"
        except ExchangeError as exc:
            mid = exc.mid_body
            record.status = Status.STREAM_INTERRUPTED if mid else Status.CONNECT_ERROR
            record.error = str(exc)[:200]
        except OSError as exc:
            record.status, record.error = Status.CONNECT_ERROR, f"{type(exc).__name__}: {exc}"[:200]
        except Exception as exc:  # a bug of ours: recorded as such, and the worker lives on
            record.status, record.error = Status.HTTP_ERROR, internal_error_text(exc)
            record.labels["outcome"] = Outcome.INTERNAL_ERROR.value
        finally:
            if conn is not None:
                origin.drop(conn)
        record.end_ns = perf_ns()
        record.labels.setdefault("outcome", record.status.value)
        if record.error:  # a candidate may echo the credentials it was sent: scrubbed by value
            carried = request_secrets({k.lower(): v for k, v in job.headers}, job.target.partition("?")[2])
            secrets = (*self.secrets, *carried, *known_secrets((), (up.auth,)))
            record.error = scrub_secrets(record.error, secrets)
        return record

    @staticmethod
    async def _send_once(
        origin: Pool, payload: bytes, connect_timeout_s: float
    ) -> tuple[HttpConnection, Exchange]:
        """One send, never a second: a shadow copy is not worth a request the candidate may read
        twice (the pool's own resend rule is not used here)."""
        idle = origin.take()
        if idle is None:
            conn, _ = await asyncio.wait_for(origin.connect(), connect_timeout_s)
        else:
            conn = idle
        ex = Exchange(asyncio.get_running_loop())
        conn.start(ex, payload, head_only=False)
        try:
            await ex.head
        except BaseException:
            origin.drop(conn)
            raise
        return conn, ex

    @staticmethod
    async def _read(ex: Exchange, conn: HttpConnection, record: RequestRecord, dialect: Dialect) -> None:
        record.headers_ns = conn.now
        record.http_status = ex.status
        meter = None
        if ex.status < 300:
            meter = Meter(record, dialect, ex.content_type.decode("latin-1"), ex.encoding.decode("latin-1"))
        sink = _Sink(meter, conn)
        ex.attach(sink)  # read to the end; the bytes are thrown away once measured
        await ex.done
        await sink.drain()
        if meter is None:
            record.status, record.error = Status.HTTP_ERROR, f"HTTP {ex.status}"
            return
        meter.finish_full(perf_ns())
        if meter.protocol_error is not None:
            record.status, record.error = Status.PROTOCOL_ERROR, meter.protocol_error
        elif meter.error is not None or not meter.finish_stream_ok():
            record.status = Status.STREAM_INTERRUPTED
            record.error = meter.error or "stream ended before [DONE]"


class _Sink(BodyReader):
    """The wire's reader for a shadow answer: every body piece to the meter, or nowhere. A
    compressed piece past the meter's inflation budget per turn is finished on later turns, the
    candidate's reading paused meanwhile (a bomb never holds the loop)."""

    __slots__ = ("conn", "loop", "meter", "now")

    def __init__(self, meter: Meter | None, conn: HttpConnection) -> None:
        self.meter = meter
        self.conn = conn
        self.loop = asyncio.get_running_loop()
        self.now = 0

    def on_body(self, data: bytes, now: int) -> None:
        meter = self.meter
        if meter is None:
            return
        meter.feed(data, now)
        if meter.inflating:
            self.now = now
            self.conn.pause_reading()
            self.loop.call_soon(self._more)

    def _more(self) -> None:
        meter = self.meter
        if meter is not None and meter.inflating:
            meter.feed(b"", self.now)
            if meter.inflating:
                self.loop.call_soon(self._more)
                return
        self.conn.resume_reading()

    async def drain(self) -> None:
        """What is left to inflate after the answer ended, a slice per turn."""
        while self.meter is not None and self.meter.inflating:
            self.meter.feed(b"", self.now)
            await asyncio.sleep(0)
