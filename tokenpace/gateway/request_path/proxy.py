"""The pass-through proxy: forwards each request, streams the upstream's bytes back unchanged, and
measures the copy it sees on the way (see meter.py). One record per generation request."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import Callable

import orjson
from aiohttp import web
from aiohttp.web_urldispatcher import _default_expect_handler

from tokenpace.core.record import RequestRecord
from tokenpace.core.workload.prompt_shape import prompt_shape
from tokenpace.gateway.config.config import GatewayConfig, Upstream, upstream_pool
from tokenpace.gateway.experiments.client_rate import ClientRate
from tokenpace.gateway.experiments.events import EventMetrics, EventsPage, RecentRequests
from tokenpace.gateway.experiments.mirror import Mirrors
from tokenpace.gateway.messages import errors
from tokenpace.gateway.messages.header_bytes import raw
from tokenpace.gateway.messages.heads import (
    HOP,
    REQUEST_ID,
    response_head,
    stream_outcome,
    upstream_headers,
    upstream_request,
)
from tokenpace.gateway.metering.budget import Budget
from tokenpace.gateway.metering.meter import Meter
from tokenpace.gateway.metering.outcome import Outcome, internal_error_text
from tokenpace.gateway.metering.realtime_meter import RealtimeMeter
from tokenpace.gateway.metering.relay import Relay
from tokenpace.gateway.metering.watchdog import Watchdog
from tokenpace.gateway.observability.arm_watch import COMPLAINT_EVENT
from tokenpace.gateway.observability.engine_watch import EngineWatch
from tokenpace.gateway.observability.hop_spans import HopTimes
from tokenpace.gateway.observability.otlp import Traces, join_trace, with_traceparent
from tokenpace.gateway.observability.prom import GatewayMetrics, GuardMetrics, ModelLabels, model_label
from tokenpace.gateway.observability.ratelog import RateLimitedLog
from tokenpace.gateway.observability.shadow_metrics import ShadowMetrics
from tokenpace.gateway.operations.admin import AdminPages, bearer_ok, upstreams_view
from tokenpace.gateway.operations.control import ControlPages, mount_admin
from tokenpace.gateway.operations.guard import Guard, GuardLimits
from tokenpace.gateway.recording.record_end import finish_record, record_internal_error
from tokenpace.gateway.recording.records import RecordMaker
from tokenpace.gateway.recording.sink import BatchWriter, RecordSink
from tokenpace.gateway.request_path.intake import carried, compressed, read_body, refused
from tokenpace.gateway.request_path.model_list import listed_models
from tokenpace.gateway.request_path.router import Router, UpstreamLoad
from tokenpace.gateway.request_path.ws_proxy import UpstreamSessions, proxy_session
from tokenpace.wire import tracecontext as tc
from tokenpace.wire.connection import HttpConnection
from tokenpace.wire.dialects import dialect_at
from tokenpace.wire.dialects.base import Dialect
from tokenpace.wire.exchange import ExchangeError

perf_ns = time.perf_counter_ns


HOP_AND_ID = HOP | {REQUEST_ID}  # a shadow copy carries its own id
OptRecord = RequestRecord | None  # a record is kept for a dialect's request only
OptDialect = Dialect | None

_GONE = "client went away"


class Gateway:
    def __init__(
        self,
        config: GatewayConfig,
        writer: BatchWriter | None = None,
        on_record: Callable[[RequestRecord], None] | None = None,
        worker: int = 0,
    ) -> None:
        self.config = config
        self.secrets = config.secrets
        self.budget = Budget()  # response bytes held to measure them, all requests together
        self.worker = worker  # which of --workers, written into each record
        self.metrics = GatewayMetrics(config.slo)
        configured = {u.model for u in config.upstreams if u.model}
        self.models = ModelLabels(configured, config.max_model_labels, self._list_models)
        self.router = Router(config.upstreams, time.monotonic)
        self.load = UpstreamLoad()  # requests in flight per upstream, recorded at dispatch
        self.sink = RecordSink(writer, config.record_queue, on_drop=self.metrics.dropped.inc)
        self.on_record = on_record
        self.origins = {u.name: upstream_pool(u.endpoint) for u in config.upstreams}
        self.app = web.Application(client_max_size=config.max_body_bytes)
        self.ws_upstreams = UpstreamSessions(config.connect_timeout_s)  # the Realtime WebSocket's
        self.engines: EngineWatch | None = None
        if config.scrape_upstream_metrics:
            self.engines = EngineWatch(
                config.upstreams, self.metrics.registry, config.scrape_interval_s, config.scrape_window_s
            )
        self.traces: Traces | None = None
        if config.otlp_endpoint:
            self.traces = Traces(config.otlp_endpoint, labels=config.static_labels)
        self.shadow_metrics = ShadowMetrics(self.metrics.registry, tuple(m.name for m in config.mirrors))
        emit = self.shadow_metrics.emitter(self.sink.put, on_record)
        self.mirrors = Mirrors.of(config, emit, self.shadow_metrics.drop)
        limits = GuardLimits(
            config.header_timeout_s, config.body_timeout_s, config.idle_timeout_s, config.max_connections
        )
        guard_metrics, log = GuardMetrics(self.metrics.registry), RateLimitedLog()
        self.guard = Guard(limits, guard_metrics, log)  # the proxy's listener
        self.admin_guard = Guard(limits, guard_metrics, log)  # the admin listener, when apart
        apart = config.admin_port is not None
        self.admin = AdminPages(
            self.metrics.registry,
            config.admin_keys,
            config.client_keys,
            lambda: upstreams_view(self.engines, {u.name: u.arm for u in self.config.upstreams}),
            self.admin_guard if apart else self.guard,
            config.static_labels,
        )
        self.recent = RecentRequests()
        self.new_record = RecordMaker(worker, self.models, self.recent, config.static_labels)
        event_metrics = EventMetrics(self.metrics.registry, {COMPLAINT_EVENT, *config.event_names})
        self.sink.events_maxsize = config.event_queue
        self.sink.on_event_drop = event_metrics.dropped.labels("queue_full").inc
        rate = ClientRate(config.events_per_client_s, config.events_burst, time.monotonic)
        self.events = EventsPage(
            self.recent, self._arm_of_user, self.sink.put, event_metrics, self.admin.allow, rate=rate
        )
        self.control = ControlPages(self.admin.allow, bool(config.admin_keys or config.client_keys))
        self.admin_app = mount_admin(self.app, apart, self.admin, self.control, self.events.post)
        self.app.router.add_route("*", "/{tail:.*}", self.handle, expect_handler=self._expect)
        self.stop_deadline: float | None = None  # loop time by which stopping must be done
        self.spans_dropped = 0  # spans never confirmed exported by then (a hanging collector)
        self.models_listed: asyncio.Task[None] | None = None  # the upstreams' /v1/models, at start
        self.app.on_startup.append(self._startup)
        self.app.on_cleanup.append(self._cleanup)

    async def _startup(self, _app: web.Application) -> None:
        self.sink.start()
        if self.engines is not None:
            self.engines.start()
        if self.mirrors is not None:
            self.mirrors.start()

    def _list_models(self) -> None:
        """Half the model label slots are taken: learn which names the upstreams serve, so that
        random names cannot take the labels of real models (asked once, in the background)."""
        self.models_listed = asyncio.get_running_loop().create_task(self._reserve_listed_models())

    async def _reserve_listed_models(self) -> None:
        for names in await asyncio.gather(*(listed_models(u) for u in self.config.upstreams)):
            self.models.reserve(names)

    async def _cleanup(self, _app: web.Application) -> None:
        if self.models_listed is not None:
            self.models_listed.cancel()
        for origin in self.origins.values():
            origin.close()
        await self.ws_upstreams.close()
        loop = asyncio.get_running_loop()  # one deadline owns shutdown: what open requests left of it
        end = self.stop_deadline or loop.time() + self.config.shutdown_timeout_s
        if self.mirrors is not None:
            await self.mirrors.close()
        if self.engines is not None:
            await self.engines.close(max(0.0, end - loop.time()))
        await self.sink.close(max(0.0, end - loop.time()))
        if self.traces is not None:  # spans not confirmed by then are counted dropped
            self.spans_dropped = await asyncio.to_thread(self.traces.close, max(0.0, end - loop.time()))

    def _arm_of_user(self, key: bytes) -> tuple[str, str]:
        """The arm a request of this user would be routed to now (any model)."""
        upstream = self.router.choose(None, key)
        return upstream.arm, upstream.name

    # --- request handling ------------------------------------------------------------------------

    def _refuse(self, request: web.Request, reason: str, resp: web.Response) -> web.Response:
        return refused(self.guard, request, reason, resp)

    async def _expect(self, request: web.Request) -> web.StreamResponse | None:
        """``Expect: 100-continue``: a request refused anyway (no key, a body over the limit) is
        answered at once, so the client never sends the body; else ``100 Continue``."""
        refusal: web.Response | None = None
        if self.config.client_keys and not bearer_ok(request, self.config.client_keys):
            refusal = self._refuse(request, "unauthorized", errors.unauthorized())
        elif request.content_length is not None and request.content_length > self.config.max_body_bytes:
            refusal = self._refuse(request, "body_too_large", errors.too_large(self.config.max_body_bytes))
        if refusal is None:
            await _default_expect_handler(request)
            return None
        refusal.force_close()  # the body may follow anyway: not read, the connection ends
        return refusal

    async def handle(self, request: web.Request) -> web.StreamResponse:
        """Every proxied request; an exception of ours still leaves its record (``internal_error``;
        before an upstream was chosen, an unrouted one) and reaches the server, which answers 500
        (or closes) and counts it."""
        start = perf_ns()
        opened: list[RequestRecord] = []  # the request's record once opened, for the safety net
        try:
            return await self._handle(request, opened, start)
        except Exception as exc:
            record_internal_error(self, request, exc, opened[0] if opened else self._unrouted(request, start))
            raise

    def _unrouted(self, request: web.Request, start: int) -> OptRecord:
        """The record of a fault before routing (``RecordMaker.unrouted``), in the caller's trace."""
        record = self.new_record.unrouted(request, start)
        if record is not None and self.traces is not None:
            with contextlib.suppress(Exception):  # the safety net must not fail
                join_trace(record, request.headers.get(tc.HEADER), start, start)
        return record

    async def _handle(
        self, request: web.Request, opened: list[RequestRecord], start: int
    ) -> web.StreamResponse:
        if self.control.readiness.draining:  # stopping: the open requests finish, no new one starts
            resp = errors.busy("the gateway is stopping: send it elsewhere")
            resp.force_close()
            return self._refuse(request, "draining", resp)
        keys = self.config.client_keys
        if keys and not bearer_ok(request, keys):
            return self._refuse(request, "unauthorized", errors.unauthorized())
        if request.method == "GET" and request.headers.get("Upgrade", "").lower() == "websocket":
            dialect = dialect_at(request.path, "GET")
            if dialect is not None:
                return await self._websocket(request, dialect, start)
        body = await read_body(request, self.config.max_body_bytes, self.config.body_timeout_s, self.guard)
        if isinstance(body, web.Response):
            return body
        dialect = dialect_at(request.path, request.method)
        if dialect is not None and dialect.method != "POST":
            dialect = None  # the Realtime WebSocket: not a request-and-body exchange
        if dialect is not None and compressed(request):  # its JSON must be read: never inflated
            return self._refuse(request, "body_compressed", errors.compressed_body())
        model: str | None = None
        user: object = None
        if dialect is not None:
            try:
                parsed = orjson.loads(body)
            except orjson.JSONDecodeError:
                resp = errors.bad_request("request body is not valid JSON")
                return self._refuse(request, "body_not_json", resp)
            if type(parsed) is not dict:
                resp = errors.bad_request("request body must be a JSON object")
                return self._refuse(request, "body_not_object", resp)
            model = parsed.get("model") if isinstance(parsed.get("model"), str) else None
            user = parsed.get("user")
            if parsed.get("stream") is not True and self.budget.exhausted:  # refused before any work
                return self._refuse(request, "memory_budget", errors.busy("gateway memory budget in use"))
        admitted = perf_ns()  # a clock read: the end of the admission span, when traced
        sticky = request.headers.get(self.config.sticky_header)
        key = raw(sticky) if sticky else (raw(user) if isinstance(user, str) and user else None)
        upstream = self.router.choose(model, key)
        record, hops = None, None
        if dialect is not None:
            label = await model_label(model)  # a body-sized name is hashed off the loop
            record = self.new_record(request, upstream, dialect, label, key, start)
            opened.append(record)  # from here a fault of ours is recorded (``handle``)
            shape = prompt_shape(parsed, self.config.keep_prompts)
            record.prompt_chars, record.prefix_hashes = shape.chars, list(shape.block_hashes)
            record.prompt_text = shape.text
            if self.traces is not None:  # continue the client's trace, or start one
                hops = join_trace(record, request.headers.get(tc.HEADER), admitted, perf_ns())
            if self.mirrors is not None:  # O(1) per mirror, never waits
                drop = HOP_AND_ID | ({"authorization"} if self.config.client_keys else set())
                self.mirrors.copy(request, body, record, dialect, key or record.request_id.encode(), drop)
        self.metrics.in_flight.inc()
        carried_load = self.load.enter(upstream.name)
        if record is not None:
            record.upstream_inflight = carried_load
        try:
            headers = upstream_headers(request, upstream, bool(self.config.client_keys))
            origin = self.origins[upstream.name]
            payload = upstream_request(
                request, body, with_traceparent(headers, record, hops), upstream, origin.endpoint.host_header
            )
            return await self._forward(request, payload, upstream, record, dialect, hops)
        finally:
            self.load.leave(upstream.name)
            self.metrics.in_flight.dec()

    async def _websocket(self, request: web.Request, dialect: Dialect, start: int) -> web.StreamResponse:
        """A Realtime session: proxied whole, one record per response (see ws_proxy.py)."""
        sticky = request.headers.get(self.config.sticky_header)
        key = raw(sticky) if sticky else None
        model = request.query.get("model")
        upstream = self.router.choose(model, key)
        nth = itertools.count(1)
        secrets = carried(request)
        meter = RealtimeMeter(
            dialect,
            lambda now: self.new_record(request, upstream, dialect, model, key, now, next(nth)),
            lambda rec, outcome, error: self._finish(rec, outcome, error, None, dialect, secrets=secrets),
            start,
        )
        self.metrics.in_flight.inc()
        try:
            return await proxy_session(request, self.ws_upstreams, upstream, meter)
        except Exception as exc:  # a bug of ours: every open response's record says so
            meter.close(Outcome.INTERNAL_ERROR, internal_error_text(exc))
            raise
        finally:
            self.metrics.in_flight.dec()

    async def _forward(
        self,
        request: web.Request,
        payload: bytes,
        upstream: Upstream,
        record: OptRecord,
        dialect: OptDialect,
        hops: HopTimes | None = None,
    ) -> web.StreamResponse:
        cfg = self.config
        origin = self.origins[upstream.name]
        dog = Watchdog(cfg.first_token_timeout_s, cfg.stall_timeout_s)
        resp: web.StreamResponse | None = None
        meter: Meter | None = None
        conn: HttpConnection | None = None
        relay: Relay | None = None
        outcome, error = Outcome.OK, None
        cut = False  # the upstream broke mid-body: the client's stream must break too
        try:
            conn, ex = await origin.request(payload, request.method == "HEAD", cfg.connect_timeout_s, hops)
            resp, meter = response_head(ex, conn, record, dialect, self.budget)
            await resp.prepare(request)
            await resp.write(b"")  # the head goes out now; the body is written by the relay
            transport = request.transport
            if transport is None:
                raise ConnectionResetError("client transport gone")
            framed = resp.headers.get("Transfer-Encoding", "") == "chunked"
            itl = self.metrics.itl_counts() if meter is not None else None
            relay = Relay(transport, conn, meter, record, dog, framed, itl, request.writer.drain)
            await relay.run(ex)
            dog.cancel()
            if relay.client_gone:
                raise ConnectionResetError(_GONE)
            if meter is not None and meter.overflow is not None:
                raise ExchangeError(meter.overflow, True)  # cut by the relay, whatever the framing
            if meter is not None:
                meter.finish_full(perf_ns())
                outcome, error = stream_outcome(meter)
            elif record is not None:
                outcome, error = Outcome.HTTP_ERROR, f"HTTP {ex.status}"
            await resp.write_eof()
            origin.release(conn)
            conn = None
        except asyncio.CancelledError:
            if dog.fired is None:
                dog.cancel()  # (the relay is stopped in ``finally``, before any other callback runs)
                if conn is not None:
                    origin.drop(conn)
                self._finish(record, Outcome.CLIENT_DISCONNECT, _GONE, meter, dialect, relay, hops)
                raise
            dog.absorb()
            cut = True
            outcome, error = dog.fired, dog.why
        except ConnectionResetError as exc:
            outcome, error = Outcome.CLIENT_DISCONNECT, f"client went away ({type(exc).__name__})"
        except ExchangeError as exc:
            if meter is not None and meter.overflow is not None:
                outcome, cut, error = Outcome.PROTOCOL_ERROR, True, meter.overflow
            elif exc.mid_body:
                outcome, cut = Outcome.UPSTREAM_ABORT_MID_STREAM, True
                error = f"upstream broke the stream ({exc})"[:200]
            else:
                outcome, error = Outcome.CONNECT_ERROR, str(exc)[:200]
        except OSError as exc:  # connect failed or timed out
            outcome, error = Outcome.CONNECT_ERROR, f"{type(exc).__name__}: {exc}"[:200]
        finally:
            dog.cancel()
            if relay is not None:
                relay.stop()
            if conn is not None:
                origin.drop(conn)
        self._finish(record, outcome, error, meter, dialect, relay, hops, carried(request) if error else ())
        if resp is None:
            timed_out = outcome in (Outcome.TIMEOUT_BEFORE_FIRST_TOKEN, Outcome.STALL)
            return errors.no_upstream_answer(timed_out, upstream.name, record.request_id if record else None)
        if cut and request.transport is not None:
            # The upstream broke; so must the client's stream, or it would look complete.
            request.transport.abort()
        return resp

    def _finish(
        self,
        record: RequestRecord | None,
        outcome: Outcome,
        error: str | None,
        meter: Meter | None,
        dialect: Dialect | None = None,
        relay: Relay | None = None,
        hops: HopTimes | None = None,
        secrets: tuple[str, ...] = (),
    ) -> None:
        itl = relay.itl if relay is not None else None
        if hops is not None and relay is not None:
            hops.upstream_end_ns = relay.ended_ns
        finish_record(self, record, outcome, error, meter, dialect, itl, hops=hops, secrets=secrets)
