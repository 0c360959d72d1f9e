"""The gateway's own pages: /metrics (Prometheus) and /tokenpace/upstreams (engine beside gateway).

They live on the proxy's port unless ``--admin-listen`` gives them their own address. With
``--admin-key`` both need ``Authorization: Bearer ADMIN_KEY``; without it /metrics is open (as
Prometheus expects) and /tokenpace/* follows the client keys, when there are any.
"""

from __future__ import annotations

import asyncio
import hmac
import os
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import orjson
from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder
from prometheus_client.multiprocess import MultiProcessCollector

from tokenpace.gateway.config.static_labels import with_labels
from tokenpace.gateway.messages import errors
from tokenpace.gateway.messages.header_bytes import raw
from tokenpace.gateway.observability.engine_watch import EngineWatch
from tokenpace.gateway.operations.guard import Guard

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
# What a refused scrape is told: how Prometheus passes the key (docs/gateway.md, the playbook)
METRICS_KEY_HINT = (
    "/metrics needs the admin key: send Authorization: Bearer ADMIN_KEY (Prometheus: authorization: "
    "{credentials_file: FILE} in the scrape config, FILE holding the key alone)"
)
ADMIN_KEY_HINT = "missing or invalid admin key: send Authorization: Bearer ADMIN_KEY"


def bearer_ok(request: web.Request, keys: Iterable[str]) -> bool:
    """Constant time per key; every key is tried."""
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not given:
        return False
    token = raw(given.strip())  # any byte a client sent: a non-ASCII key is just a wrong key
    ok = False
    for key in keys:
        ok |= hmac.compare_digest(token, key.encode())
    return ok


# A rendered page is served again for REST x its render time (CPU) after it, when that was over
# MIN_RENDER_S: the renderer is pure Python and holds the GIL throughout (~110 ms with 32 model
# slots filled), so scrapes back to back would leave the loop only the interpreter's switch
# intervals. Rendering then holds the GIL at most 1/(1 + REST) of the time, however many scrape.
REST = 4
MIN_RENDER_S = 0.010


class RenderedPages:
    """The latest page per content type; one render at a time, shared by the scrapes that wait."""

    def __init__(self) -> None:
        self.latest: dict[str, tuple[float, bytes]] = {}  # content type -> (served until, page)
        self.rendering: dict[str, asyncio.Future[tuple[float, bytes]]] = {}  # one per content type

    async def get(self, content_type: str, render: Callable[[], bytes]) -> bytes:
        until, page = self.latest.get(content_type, (0.0, b""))
        if time.monotonic() < until:
            return page
        running = self.rendering.get(content_type)
        if running is None:
            running = asyncio.ensure_future(asyncio.to_thread(_timed, render))
            self.rendering[content_type] = running
            running.add_done_callback(lambda f: self._done(content_type, f))
        return (await asyncio.shield(running))[1]

    def _done(self, content_type: str, fut: asyncio.Future[tuple[float, bytes]]) -> None:
        del self.rendering[content_type]
        if not fut.cancelled() and fut.exception() is None:
            took, page = fut.result()
            if took > MIN_RENDER_S:
                self.latest[content_type] = (time.monotonic() + REST * took, page)


def _timed(render: Callable[[], bytes]) -> tuple[float, bytes]:
    """The page and the CPU time this thread spent rendering it."""
    t0 = time.thread_time()
    page = render()
    return time.thread_time() - t0, page


class AdminPages:
    def __init__(
        self,
        registry: CollectorRegistry,
        admin_keys: frozenset[str],
        client_keys: frozenset[str],
        upstreams: Callable[[], dict[str, Any]],
        guard: Guard,
        static_labels: Mapping[str, str] | None = None,
    ) -> None:
        self.registry = registry
        self.static_labels = dict(static_labels or {})  # --label: on every sample, at scrape time
        # a fleet's replica: gateway_fleet on every sample (the dashboard's fleet variable); set at
        # start from --fleet, never by a live change
        self.fleet_labels: dict[str, str] = {}
        # the config's epoch (live changes since the start): on every sample once the config has
        # changed (epoch 0, the start's config, adds no label: the series stay as they were)
        self.epoch = "0"
        self.admin_keys = admin_keys
        self.client_keys = client_keys
        self._upstreams = upstreams
        self.guard = guard  # the listener's guard counts the 401s
        self.pages = RenderedPages()

    def add_to(self, app: web.Application) -> None:
        app.router.add_get("/metrics", self.prometheus)
        app.router.add_get("/tokenpace/upstreams", self.upstreams)

    def _refuse(self, request: web.Request) -> web.Response:
        self.guard.rejected("admin_unauthorized", request.remote, 401)
        if not self.admin_keys:  # /tokenpace/* behind the client keys
            return errors.unauthorized()
        return errors.unauthorized(METRICS_KEY_HINT if request.path == "/metrics" else ADMIN_KEY_HINT)

    async def prometheus(self, request: web.Request) -> web.Response:
        if self.admin_keys and not bearer_ok(request, self.admin_keys):
            return self._refuse(request)
        # OpenMetrics when the scraper asks for it: the only format that carries exemplars (trace
        # ids). Rendered in a thread: tens of ms for a big registry, which on the loop would be
        # added to the TTFT of every stream in flight (the metrics take their own locks).
        encode, content_type = choose_encoder(request.headers.get("Accept", ""))
        body = await self.pages.get(
            content_type, lambda: encode(with_labels(exposed(self.registry), self.labels))
        )
        resp = web.Response(body=body)
        resp.headers["Content-Type"] = content_type
        return resp

    @property
    def labels(self) -> dict[str, str]:
        if self.epoch == "0":
            return {**self.static_labels, **self.fleet_labels}
        return {**self.static_labels, **self.fleet_labels, "config_epoch": self.epoch}

    def allow(self, request: web.Request) -> web.Response | None:
        """None when /tokenpace/* may be served: the admin keys, else the client keys, else open."""
        keys = self.admin_keys or self.client_keys
        if keys and not bearer_ok(request, keys):
            return self._refuse(request)
        return None

    async def upstreams(self, request: web.Request) -> web.Response:
        refused = self.allow(request)
        if refused is not None:
            return refused
        return web.Response(body=orjson.dumps(self._upstreams()), content_type="application/json")


def exposed(registry: CollectorRegistry) -> CollectorRegistry:
    """What /metrics shows: this process's registry, or with --workers the sum over every worker's
    files (prometheus_client's multiprocess mode, set up by workers.py)."""
    path = os.environ.get(MULTIPROC_ENV)
    if not path:
        return registry
    merged = CollectorRegistry()
    MultiProcessCollector(merged, path=path)
    return merged


async def not_here(_request: web.Request) -> web.Response:
    """On the proxy port when the admin pages have their own address: not forwarded either."""
    return errors.error_response(404, "not served on this address", "invalid_request_error", "not_found")


def upstreams_view(engines: EngineWatch | None, upstreams: dict[str, str]) -> dict[str, Any]:
    """Per upstream: gateway TTFT against the engine's own TTFT over the recent window."""
    if engines is None:
        data: dict[str, Any] = {"upstreams": {name: {"arm": arm} for name, arm in upstreams.items()}}
        data["note"] = "start the gateway with --scrape-upstream-metrics for engine-side numbers"
        return data
    engines.refresh()
    return engines.snapshot()
