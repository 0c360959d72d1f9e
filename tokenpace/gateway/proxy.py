"""The pass-through proxy: forwards each request, streams the upstream's bytes back unchanged, and
measures the copy it sees on the way (see meter.py). One record per generation request."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Callable

import orjson
from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from tokenpace.core.credentials import scrub_secrets
from tokenpace.core.record import RequestRecord
from tokenpace.core.workload.prompt_shape import prompt_shape
from tokenpace.gateway import errors
from tokenpace.gateway.admin import AdminPages, bearer_ok, not_here, upstreams_view
from tokenpace.gateway.config import GatewayConfig, Upstream
from tokenpace.gateway.engine_watch import EngineWatch
from tokenpace.gateway.events import EventMetrics, EventsPage, RecentRequests, user_hash
from tokenpace.gateway.guard import Guard, GuardLimits
from tokenpace.gateway.meter import Meter, dialect_for
from tokenpace.gateway.mirror import Mirrors
from tokenpace.gateway.otlp import Traces, join_trace, with_traceparent
from tokenpace.gateway.outcome import STATUS, Outcome
from tokenpace.gateway.prom import GatewayMetrics, GuardMetrics, ModelLabels
from tokenpace.gateway.ratelog import RateLimitedLog
from tokenpace.gateway.relay import Relay
from tokenpace.gateway.router import Router
from tokenpace.gateway.shadow_metrics import ShadowMetrics
from tokenpace.gateway.sink import BatchWriter, RecordSink
from tokenpace.gateway.upstream import Origin, UpstreamConnection, UpstreamError, request_bytes, send
from tokenpace.gateway.watchdog import Watchdog
from tokenpace.wire import tracecontext as tc
from tokenpace.wire.dialects import OpenAIChat

perf_ns = time.perf_counter_ns

# Hop-by-hop headers (RFC 9110 7.6.1) and those aiohttp sets itself; everything else passes through.
_HOP = frozenset(
    h.lower()
    for h in (
        "Connection",
        "Keep-Alive",
        "Proxy-Authenticate",
        "Proxy-Authorization",
        "TE",
        "Trailer",
        "Transfer-Encoding",
        "Upgrade",
        "Host",
        "Content-Length",
        "Expect",
    )
)


REQUEST_ID = "x-request-id"  # the client's own (bounded), else ours: events are reported against it
UPSTREAM_REQUEST_ID = "x-upstream-request-id"

_NOT_OURS_TO_BLAME = (Outcome.HTTP_ERROR, Outcome.CONNECT_ERROR)


class Gateway:
    def __init__(
        self,
        config: GatewayConfig,
        writer: BatchWriter | None = None,
        on_record: Callable[[RequestRecord], None] | None = None,
        worker: int = 0,
    ) -> None:
        self.config = config
        self.worker = worker  # which of --workers, written into each record
        self.metrics = GatewayMetrics(config.slo)
        self.models = ModelLabels({u.model for u in config.upstreams if u.model}, config.max_model_labels)
        self.router = Router(config.upstreams, time.monotonic)
        self.sink = RecordSink(writer, config.record_queue, on_drop=self.metrics.dropped.inc)
        self.on_record = on_record
        self.origins = {u.name: Origin(u.origin, config.connect_timeout_s) for u in config.upstreams}
        self.app = web.Application(client_max_size=config.max_body_bytes)
        self.engines: EngineWatch | None = None
        if config.scrape_upstream_metrics:
            self.engines = EngineWatch(
                config.upstreams, self.metrics.registry, config.scrape_interval_s, config.scrape_window_s
            )
        self.traces: Traces | None = Traces(config.otlp_endpoint) if config.otlp_endpoint else None
        self.mirrors: Mirrors | None = None
        if config.mirrors:
            shadow = ShadowMetrics(self.metrics.registry, tuple(m.name for m in config.mirrors))
            self.shadow_metrics = shadow
            self.mirrors = Mirrors(
                config.mirrors,
                self._finish_shadow,
                shadow.drop,
                config.mirror_queue,
                config.mirror_concurrency,
                config.mirror_max_bytes,
                config.connect_timeout_s,
                config.first_token_timeout_s,
            )
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
            lambda: upstreams_view(self.engines, {u.name: u.arm for u in config.upstreams}),
            self.admin_guard if apart else self.guard,
        )
        self.recent = RecentRequests()
        event_metrics = EventMetrics(self.metrics.registry)
        self.events = EventsPage(
            self.recent, self._arm_of_user, self.sink.put, event_metrics, self.admin.allow
        )
        self.admin_app: web.Application | None = None
        if apart:
            self.admin_app = web.Application()
            self.admin.add_to(self.admin_app)
            self.admin_app.router.add_post("/tokenpace/events", self.events.post)
            self.app.router.add_get("/metrics", not_here)
            self.app.router.add_route("*", "/tokenpace/{tail:.*}", not_here)
        else:
            self.admin.add_to(self.app)
            self.app.router.add_post("/tokenpace/events", self.events.post)
        self.app.router.add_route("*", "/{tail:.*}", self.handle)
        self.app.on_startup.append(self._startup)
        self.app.on_cleanup.append(self._cleanup)

    async def _startup(self, _app: web.Application) -> None:
        self.sink.start()
        if self.engines is not None:
            self.engines.start()
        if self.mirrors is not None:
            self.mirrors.start()

    async def _cleanup(self, _app: web.Application) -> None:
        for origin in self.origins.values():
            origin.close()
        if self.mirrors is not None:
            await self.mirrors.close()
        if self.engines is not None:
            await self.engines.close()
        await self.sink.close()
        if self.traces is not None:
            await asyncio.to_thread(self.traces.close)

    def _arm_of_user(self, key: bytes) -> tuple[str, str]:
        """The arm a request of this user would be routed to now (any model)."""
        upstream = self.router.choose(None, key)
        return upstream.arm, upstream.name

    # --- request handling ------------------------------------------------------------------------

    def _refuse(self, request: web.Request, reason: str, resp: web.Response) -> web.Response:
        self.guard.rejected(reason, request.remote, resp.status)
        return resp

    async def handle(self, request: web.Request) -> web.StreamResponse:
        start = perf_ns()
        keys = self.config.client_keys
        if keys and not bearer_ok(request, keys):
            return self._refuse(request, "unauthorized", errors.unauthorized())
        limit = self.config.max_body_bytes
        if request.content_length is not None and request.content_length > limit:
            return self._refuse(request, "body_too_large", errors.too_large(limit))
        try:
            if request.content.is_eof():  # the whole body came with the head: no timer, no task
                body = await request.read()
            else:
                body = await asyncio.wait_for(request.read(), self.config.body_timeout_s)
        except web.HTTPRequestEntityTooLarge:
            return self._refuse(request, "body_too_large", errors.too_large(limit))
        except asyncio.TimeoutError:
            self.guard.closed("body_timeout", request.remote)
            resp = errors.error_response(408, "request body too slow", "invalid_request_error", "timeout")
            resp.force_close()
            return resp
        except (HttpProcessingError, ConnectionError):
            resp = errors.bad_request("incomplete or malformed request body")
            resp.force_close()
            return self._refuse(request, "body_incomplete", resp)
        dialect = dialect_for(request.path) if request.method == "POST" else None
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
            shape = prompt_shape(parsed, self.config.keep_prompts)
        sticky = request.headers.get(self.config.sticky_header)
        key = sticky.encode() if sticky else (user.encode() if isinstance(user, str) and user else None)
        upstream = self.router.choose(model, key)
        record = None
        if dialect is not None:
            user = user_hash(key) if key else None
            record = RequestRecord(
                # the client's own id when it sent one (bounded), so its logs join these records
                request_id=(request.headers.get("x-request-id") or "")[:128] or uuid.uuid4().hex,
                worker=self.worker,
                labels={
                    "model": self.models(upstream.model or model),
                    "upstream": upstream.name,
                    "arm": upstream.arm,
                    **upstream.labels,
                    **({"user": user} if user else {}),
                },
                scheduled_ns=start,
                dispatched_ns=start,
                sent_ns=start,
                prompt_chars=shape.chars,
                prefix_hashes=list(shape.block_hashes),
                prompt_text=shape.text,
            )
            if self.traces is not None:  # continue the client's trace, or start one
                join_trace(record, request.headers.get(tc.HEADER))
            self.recent.add(record.request_id, upstream.arm, upstream.name, user)
            if self.mirrors is not None:  # O(1) per mirror, never waits
                drop = (
                    _HOP | {REQUEST_ID, "authorization"} if self.config.client_keys else _HOP | {REQUEST_ID}
                )
                self.mirrors.copy(request, body, record, dialect, key or record.request_id.encode(), drop)
        self.metrics.in_flight.inc()
        try:
            return await self._forward(request, body, upstream, record, dialect)
        finally:
            self.metrics.in_flight.dec()

    async def _forward(self, request, body, upstream: Upstream, record, dialect) -> web.StreamResponse:
        cfg = self.config
        origin = self.origins[upstream.name]
        headers = [(k, v) for k, v in request.headers.items() if k.lower() not in _HOP]
        headers = with_traceparent(headers, record)
        if upstream.auth is not None and "Authorization" not in request.headers:
            headers.append(("Authorization", upstream.auth))  # from the URL's user:password
        target = upstream.base_path + request.rel_url.raw_path_qs
        payload = request_bytes(request.method, target, origin.host_header, headers, body)
        dog = Watchdog(cfg.first_token_timeout_s, cfg.stall_timeout_s)
        resp: web.StreamResponse | None = None
        meter: Meter | None = None
        conn: UpstreamConnection | None = None
        outcome = Outcome.OK
        error: str | None = None
        cut = False  # the upstream broke mid-body: the client's stream must break too
        try:
            conn, ex = await send(origin, request.method, payload)
            resp, meter = _head(ex, record, dialect, conn.now)
            await resp.prepare(request)
            await resp.write(b"")  # the head goes out now; the body is written by the relay
            transport = request.transport
            if transport is None:
                raise ConnectionResetError("client transport gone")
            framed = resp.headers.get("Transfer-Encoding", "") == "chunked"
            relay = Relay(transport, conn, meter, record, dog, framed)
            await relay.run(ex)
            dog.cancel()
            if relay.client_gone:
                raise ConnectionResetError("client went away")
            if meter is not None and meter.overflow is not None:
                raise UpstreamError(meter.overflow, True)  # cut by the relay, whatever the framing
            if meter is not None:
                meter.finish_full(perf_ns())
                outcome, error = _stream_outcome(meter)
            elif record is not None:
                outcome, error = Outcome.HTTP_ERROR, f"HTTP {ex.status}"
            await resp.write_eof()
            origin.release(conn)
            conn = None
        except asyncio.CancelledError:
            if dog.fired is None:
                dog.cancel()
                if conn is not None:
                    conn.abort()
                self._finish(record, Outcome.CLIENT_DISCONNECT, "client went away", meter, dialect)
                raise
            dog.absorb()
            cut = True
            outcome, error = dog.fired, dog.why
        except ConnectionResetError as exc:
            outcome, error = Outcome.CLIENT_DISCONNECT, f"client went away ({type(exc).__name__})"
        except UpstreamError as exc:
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
            if conn is not None:
                conn.abort()
        self._finish(record, outcome, error, meter, dialect)
        if resp is None:
            if outcome in (Outcome.TIMEOUT_BEFORE_FIRST_TOKEN, Outcome.STALL):
                resp = errors.gateway_timeout(upstream.name)
            else:
                resp = errors.bad_gateway(upstream.name)
            if record is not None:
                resp.headers[REQUEST_ID] = record.request_id
            return resp
        if cut and request.transport is not None:
            # The upstream broke; so must the client's stream, or it would look complete.
            request.transport.abort()
        return resp

    def _finish_shadow(self, record: RequestRecord) -> None:
        """A shadow copy's record: its own series and arm in the store, never the live metrics."""
        self.shadow_metrics.observe(record)
        self.sink.put(record)
        if self.on_record is not None:
            with contextlib.suppress(Exception):
                self.on_record(record)

    def _finish(
        self, record: RequestRecord | None, outcome: Outcome, error: str | None, meter, dialect=None
    ) -> None:
        if record is None:
            return
        record.end_ns = perf_ns()
        if meter is not None and meter.protocol_error and outcome not in _NOT_OURS_TO_BLAME:
            # The stream broke first: what followed (the client leaving, a missing [DONE]) is a
            # consequence, kept after the reason.
            then = f"; then {error}" if error and outcome is not Outcome.PROTOCOL_ERROR else ""
            outcome, error = Outcome.PROTOCOL_ERROR, (meter.protocol_error + then)[:200]
        record.status = STATUS[outcome]
        record.labels["outcome"] = outcome.value
        record.error = scrub_secrets(error)  # an upstream may echo a key back in its error
        self.metrics.observe(record)
        self.sink.put(record)
        if self.engines is not None:
            self.engines.add(record)
        if self.traces is not None:
            with contextlib.suppress(Exception):  # tracing must never fail a request
                self.traces.record(record, "chat" if isinstance(dialect, OpenAIChat) else "text_completion")
        if self.on_record is not None:
            with contextlib.suppress(Exception):
                self.on_record(record)


def _stream_outcome(meter: Meter) -> tuple[Outcome, str | None]:
    rec = meter.record
    if rec.http_status is not None and rec.http_status >= 300:
        return Outcome.HTTP_ERROR, f"HTTP {rec.http_status}"
    if meter.error is not None:
        return Outcome.UPSTREAM_ABORT_MID_STREAM, meter.error
    if not meter.finish_stream_ok():
        return Outcome.UPSTREAM_ABORT_MID_STREAM, "stream ended before [DONE]"
    return Outcome.OK, None


def _head(ex, record: RequestRecord | None, dialect, now: int) -> tuple[web.StreamResponse, Meter | None]:
    """The client's response head (the upstream's, less hop-by-hop headers), and the meter of a
    generation request's successful body."""
    up_headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in ex.headers]
    meter = None
    if record is not None:
        record.headers_ns, record.http_status = now, ex.status
        if ex.status < 300:
            content_type = _header(up_headers, "content-type")
            meter = Meter(record, dialect, content_type, _header(up_headers, "content-encoding").lower())
    resp = web.StreamResponse(status=ex.status, reason=ex.reason.decode("latin-1") or None)
    for k, v in up_headers:
        lower = k.lower()
        if lower == REQUEST_ID and record is not None:
            resp.headers.add(UPSTREAM_REQUEST_ID, v)  # ours is the one events are reported against
        elif lower not in _HOP:
            resp.headers.add(k, v)
    if record is not None:
        resp.headers[REQUEST_ID] = record.request_id
    if ex.length is not None and not ex.chunked:
        resp.content_length = ex.length
    return resp, meter


def _header(headers: list[tuple[str, str]], name: str) -> str:
    for k, v in headers:
        if k.lower() == name:
            return v
    return ""
