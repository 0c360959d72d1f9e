"""The operator's endpoints: liveness, readiness, and the running configuration.

- ``GET /tokenpace/live``: 200 while the process serves, through the drain too (no key: a kubelet
  sends none).
- ``GET /tokenpace/ready``: 200 once every upstream with weight answered (a TCP connection or a
  response) and not draining; else 503 with the reason (``draining: N requests in flight`` from
  SIGTERM until the drain ends: the admin pages stay up meanwhile, lifecycle/serve.py). No key.
- ``GET /tokenpace/config``: the running configuration's live settings and its epoch (the keys of
  /tokenpace/*: admin keys, else client keys, else open).
- ``POST /tokenpace/config``: re-read the configuration file (empty body, or ``{"reload": true}``),
  or move the split (``{"weights": {"b": 5, "a": 95}, "by": "who"}``). Needs a key: the admin keys,
  else the client keys; a gateway with neither refuses it (403: SIGHUP still reloads). The answer
  says what changed, or every reason the change was refused (422; the running config stays).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson
from aiohttp import web

from tokenpace.gateway.config.live import ChangeResult
from tokenpace.gateway.messages import errors
from tokenpace.gateway.operations.admin import AdminPages, not_here

MAX_CHANGE_BYTES = 64 * 1024  # a change is a few weights, not a document
MAX_WHO_CHARS = 120


class Changer(Protocol):
    """What applies a change (lifecycle/reload.py's Reloader)."""

    async def reload(self, who: str) -> ChangeResult: ...

    async def set_weights(self, weights: Mapping[str, float], who: str) -> ChangeResult: ...

    def current(self) -> dict[str, Any]: ...


@dataclass(slots=True)
class Readiness:
    """Ready once each upstream with weight at the start answered once, until draining begins."""

    waiting: set[str] = field(default_factory=set)  # upstream names not yet heard from
    draining: bool = False
    in_flight: Callable[[], int] = lambda: 0  # requests being proxied now (set by the lifecycle)

    def answered(self, name: str) -> None:
        self.waiting.discard(name)

    def why_not(self) -> str | None:
        if self.draining:
            return f"draining: {self.in_flight()} requests in flight"
        if self.waiting:
            return "waiting for upstream(s) to answer: " + ", ".join(sorted(self.waiting))
        return None


class ControlPages:
    def __init__(self, allow: Callable[[web.Request], web.Response | None], has_keys: bool) -> None:
        self.allow = allow  # the /tokenpace/* keys (AdminPages.allow)
        self.has_keys = has_keys  # without any key a change is refused (anyone could route traffic)
        self.readiness = Readiness()
        self.changer: Changer | None = None  # set by the lifecycle once the gateway is composed

    def add_to(self, app: web.Application) -> None:
        app.router.add_get("/tokenpace/live", self.live)
        app.router.add_get("/tokenpace/ready", self.ready)
        app.router.add_get("/tokenpace/config", self.config)
        app.router.add_post("/tokenpace/config", self.change)

    async def live(self, _request: web.Request) -> web.Response:
        return _json({"live": True})

    async def ready(self, _request: web.Request) -> web.Response:
        why = self.readiness.why_not()
        return _json({"ready": why is None, **({"why": why} if why else {})}, 200 if why is None else 503)

    async def config(self, request: web.Request) -> web.Response:
        refused = self.allow(request)
        if refused is not None:
            return refused
        if self.changer is None:
            return errors.error_response(503, "not started", "server_error", "not_ready")
        return _json(self.changer.current())

    async def change(self, request: web.Request) -> web.Response:
        if not self.has_keys:
            return errors.error_response(
                403,
                "changing the configuration needs a key (--admin-key); SIGHUP reloads the file",
                "permission_error",
                "no_admin_key",
            )
        refused = self.allow(request)
        if refused is not None:
            return refused
        if self.changer is None:
            return errors.error_response(503, "not started", "server_error", "not_ready")
        body = await _read(request)
        if isinstance(body, web.Response):
            return body
        by = body.get("by")
        who = f"POST /tokenpace/config from {request.remote or '?'}"
        shown = "".join(c for c in by if c.isprintable()).strip() if isinstance(by, str) else ""
        if shown:  # printable only: it goes to the log and the store as it is
            who += f" ({shown[:MAX_WHO_CHARS]})"
        weights = body.get("weights")
        unknown = set(body) - {"by", "weights", "reload"}
        if unknown:
            return errors.bad_request("unknown field(s); fields: weights, reload, by")
        run: Awaitable[ChangeResult]
        if weights is None:
            run = self.changer.reload(who)
        elif isinstance(weights, dict) and weights:
            run = self.changer.set_weights(weights, who)
        else:
            return errors.bad_request("'weights' must be an object of arm -> weight")
        result = await run
        return _json(result.to_dict(), 422 if result.refused else 200)


def mount_admin(
    app: web.Application,
    apart: bool,
    admin: AdminPages,
    control: ControlPages,
    post_events: Callable[[web.Request], Awaitable[web.StreamResponse]],
) -> web.Application | None:
    """The admin surface's routes on the proxy's app, or on an app of their own (returned) when
    --admin-listen puts them apart; then the proxy's port answers 404 for them, never forwards them."""
    target = web.Application() if apart else app
    admin.add_to(target)
    control.add_to(target)
    target.router.add_post("/tokenpace/events", post_events)
    if apart:
        app.router.add_get("/metrics", not_here)
        app.router.add_route("*", "/tokenpace/{tail:.*}", not_here)
    return target if apart else None


async def _read(request: web.Request) -> dict[str, Any] | web.Response:
    if request.content_length is not None and request.content_length > MAX_CHANGE_BYTES:
        return errors.too_large(MAX_CHANGE_BYTES)
    data = await request.content.read(MAX_CHANGE_BYTES + 1)
    if len(data) > MAX_CHANGE_BYTES:
        return errors.too_large(MAX_CHANGE_BYTES)
    if not data.strip():
        return {}
    try:
        body = orjson.loads(data)
    except orjson.JSONDecodeError:
        return errors.bad_request("the body is not JSON")
    if not isinstance(body, dict):
        return errors.bad_request("the body must be a JSON object")
    return body


def _json(data: Any, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(data), status=status, content_type="application/json")
