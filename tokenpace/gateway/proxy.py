"""The pass-through proxy: forwards each request, streams the upstream's bytes back unchanged, and
measures the copy it sees on the way (see meter.py). One record per generation request."""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import time
import uuid
from collections.abc import Callable

import aiohttp
import orjson
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from tokenpace.gateway import errors
from tokenpace.gateway.config import GatewayConfig, Upstream
from tokenpace.gateway.meter import Meter, dialect_for
from tokenpace.gateway.outcome import STATUS, Outcome
from tokenpace.gateway.prom import GatewayMetrics, ModelLabels
from tokenpace.gateway.router import Router
from tokenpace.gateway.sink import BatchWriter, RecordSink
from tokenpace.gateway.watchdog import Watchdog
from tokenpace.record import RequestRecord

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
    )
)


class Gateway:
    def __init__(
        self,
        config: GatewayConfig,
        writer: BatchWriter | None = None,
        on_record: Callable[[RequestRecord], None] | None = None,
    ) -> None:
        self.config = config
        self.metrics = GatewayMetrics(config.slo)
        self.models = ModelLabels({u.model for u in config.upstreams if u.model}, config.max_model_labels)
        self.router = Router(config.upstreams, time.monotonic)
        self.sink = RecordSink(writer, config.record_queue, on_drop=self.metrics.dropped.inc)
        self.on_record = on_record
        self.session: aiohttp.ClientSession | None = None
        self.app = web.Application(client_max_size=config.max_body_bytes)
        self.app.router.add_get("/metrics", self.prometheus)
        self.app.router.add_route("*", "/{tail:.*}", self.handle)
        self.app.on_startup.append(self._startup)
        self.app.on_cleanup.append(self._cleanup)

    async def _startup(self, _app: web.Application) -> None:
        connector = aiohttp.TCPConnector(limit=0, keepalive_timeout=30)
        self.session = aiohttp.ClientSession(
            connector=connector,
            auto_decompress=False,  # forward compressed bytes as they are
            timeout=aiohttp.ClientTimeout(total=None, connect=self.config.connect_timeout_s),
            # Send only the client's own headers: an added Accept-Encoding would change the bytes.
            skip_auto_headers=("Accept-Encoding", "User-Agent", "Accept"),
        )
        self.sink.start()

    async def _cleanup(self, _app: web.Application) -> None:
        if self.session is not None:
            await self.session.close()
        await self.sink.close()

    async def prometheus(self, _request: web.Request) -> web.Response:
        resp = web.Response(body=generate_latest(self.metrics.registry))
        resp.headers["Content-Type"] = CONTENT_TYPE_LATEST
        return resp

    # --- request handling ------------------------------------------------------------------------

    def _authorized(self, request: web.Request) -> bool:
        keys = self.config.client_keys
        if not keys:
            return True
        scheme, _, given = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not given:
            return False
        token = given.strip().encode()
        ok = False
        for key in keys:  # constant time per key; every key is tried
            ok |= hmac.compare_digest(token, key.encode())
        return ok

    async def handle(self, request: web.Request) -> web.StreamResponse:
        start = perf_ns()
        if not self._authorized(request):
            return errors.unauthorized()
        limit = self.config.max_body_bytes
        if request.content_length is not None and request.content_length > limit:
            return errors.too_large(limit)
        try:
            body = await request.read()
        except web.HTTPRequestEntityTooLarge:
            return errors.too_large(limit)
        dialect = dialect_for(request.path) if request.method == "POST" else None
        model: str | None = None
        user: object = None
        if dialect is not None:
            try:
                parsed = orjson.loads(body)
            except orjson.JSONDecodeError:
                return errors.bad_request("request body is not valid JSON")
            if type(parsed) is not dict:
                return errors.bad_request("request body must be a JSON object")
            model = parsed.get("model") if isinstance(parsed.get("model"), str) else None
            user = parsed.get("user")
        sticky = request.headers.get(self.config.sticky_header)
        key = sticky.encode() if sticky else (user.encode() if isinstance(user, str) and user else None)
        upstream = self.router.choose(model, key)
        record = None
        if dialect is not None:
            record = RequestRecord(
                request_id=uuid.uuid4().hex,
                labels={
                    "model": self.models(upstream.model or model),
                    "upstream": upstream.name,
                    "arm": upstream.arm,
                    **upstream.labels,
                },
                scheduled_ns=start,
                dispatched_ns=start,
                sent_ns=start,
            )
        self.metrics.in_flight.inc()
        try:
            return await self._forward(request, body, upstream, record, dialect)
        finally:
            self.metrics.in_flight.dec()

    async def _forward(self, request, body, upstream: Upstream, record, dialect) -> web.StreamResponse:
        assert self.session is not None
        cfg = self.config
        headers = [(k, v) for k, v in request.headers.items() if k.lower() not in _HOP]
        url = upstream.origin + upstream.base_path + request.rel_url.raw_path_qs
        dog = Watchdog(cfg.first_token_timeout_s, cfg.stall_timeout_s)
        resp: web.StreamResponse | None = None
        meter: Meter | None = None
        outcome = Outcome.OK
        error: str | None = None
        cut = False  # the upstream broke mid-body: the client's stream must break too
        try:
            async with self.session.request(
                request.method, url, data=body, headers=headers, allow_redirects=False
            ) as up:
                now = perf_ns()
                if record is not None:
                    record.headers_ns, record.http_status = now, up.status
                    if up.status < 300:
                        meter = Meter(
                            record,
                            dialect,
                            up.headers.get("Content-Type", ""),
                            up.headers.get("Content-Encoding", "").lower(),
                        )
                resp = web.StreamResponse(status=up.status, reason=up.reason)
                for k, v in up.headers.items():
                    if k.lower() not in _HOP:
                        resp.headers.add(k, v)
                if up.content_length is not None and "chunked" not in up.headers.get("Transfer-Encoding", ""):
                    resp.content_length = up.content_length
                await resp.prepare(request)
                tokens = 0
                async for data in up.content.iter_any():
                    now = perf_ns()
                    if meter is not None:
                        meter.feed(data, now)
                        if len(record.token_ns) != tokens:  # type: ignore[union-attr]
                            tokens = len(record.token_ns)  # type: ignore[union-attr]
                            dog.activity(True)
                        elif meter.sse is None or meter.error or meter.protocol_error:
                            dog.activity(True)  # nothing to count tokens by: bytes are progress
                    elif record is None:
                        dog.activity(True)  # unmeasured path: any bytes are progress
                    await resp.write(data)
                dog.cancel()
                now = perf_ns()
                if meter is not None:
                    meter.finish_full(now)
                    outcome, error = _stream_outcome(meter)
                elif record is not None:
                    outcome, error = Outcome.HTTP_ERROR, f"HTTP {up.status}"
                await resp.write_eof()
        except asyncio.CancelledError:
            if dog.fired is None:
                dog.cancel()
                self._finish(record, Outcome.CLIENT_DISCONNECT, "client went away", meter)
                raise
            dog.absorb()
            cut = True
            outcome, error = dog.fired, f"no token for {_limit(dog)} s"
        except ConnectionResetError as exc:
            # Writing to the client failed: the client went away; leaving the block closed upstream.
            outcome, error = Outcome.CLIENT_DISCONNECT, f"client went away ({type(exc).__name__})"
        except (aiohttp.ClientPayloadError, aiohttp.ServerDisconnectedError, aiohttp.ClientOSError) as exc:
            if resp is None and isinstance(exc, aiohttp.ClientOSError | aiohttp.ServerDisconnectedError):
                outcome, error = Outcome.CONNECT_ERROR, f"{type(exc).__name__}: {exc}"[:200]
            else:
                outcome, cut = Outcome.UPSTREAM_ABORT_MID_STREAM, True
                error = f"upstream broke the stream ({type(exc).__name__})"
        except (aiohttp.ClientConnectionError, OSError) as exc:
            outcome, error = Outcome.CONNECT_ERROR, f"{type(exc).__name__}: {exc}"[:200]
        finally:
            dog.cancel()
        self._finish(record, outcome, error, meter)
        if resp is None:
            if outcome in (Outcome.TIMEOUT_BEFORE_FIRST_TOKEN, Outcome.STALL):
                return errors.gateway_timeout(upstream.name)
            return errors.bad_gateway(upstream.name)
        if cut and request.transport is not None:
            # The upstream broke; so must the client's stream, or it would look complete.
            request.transport.abort()
        return resp

    def _finish(self, record: RequestRecord | None, outcome: Outcome, error: str | None, meter) -> None:
        if record is None:
            return
        record.end_ns = perf_ns()
        if meter is not None and meter.protocol_error and outcome is Outcome.OK:
            outcome, error = Outcome.PROTOCOL_ERROR, meter.protocol_error
        record.status = STATUS[outcome]
        record.labels["outcome"] = outcome.value
        record.error = error
        self.metrics.observe(record)
        self.sink.put(record)
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


def _limit(dog: Watchdog) -> float:
    return dog.stall_s if dog.token else dog.first_token_s
