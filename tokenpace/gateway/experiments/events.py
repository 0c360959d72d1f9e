"""``POST /tokenpace/events``: business outcomes an application reports against the gateway's
requests, joined to the request's arm and stored beside the records.

- The proxy answers every request with its ``x-request-id``; ``RecentRequests`` remembers the last
  ``capacity`` of them (request id -> arm, upstream, user hash) so an event finds its arm.
- An event by ``user_id`` finds the arm by the same sticky routing a request of that user would get.
- A request id the gateway does not remember (evicted, another ``--workers`` process, a typo) is
  counted (``arm="unknown"``) and stored with its request id: ``tokenpace arms`` joins it to the
  stored record later. Nothing reported is lost.
- Events leave through the record sink (their own bounded queue, behind the records', same writer
  thread and store transaction path); the proxy never waits on the store. Each client address
  may post ``ClientRate`` events per second (a burst above that): more get a 429, counted.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable

import orjson
from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from prometheus_client import CollectorRegistry, Counter

from tokenpace.core.events import UNKNOWN_ARM, EventError, EventInput, OutcomeEvent, parse_events
from tokenpace.gateway.experiments.client_rate import ClientRate
from tokenpace.gateway.messages import errors
from tokenpace.gateway.messages.header_bytes import raw

EVENTS = "tokenpace_gateway_outcome_events_total"
EVENTS_DROPPED = "tokenpace_gateway_outcome_events_dropped_total"
MAX_EVENTS_BODY = 256 * 1024
# Distinct undeclared event names as Prometheus labels; the rest are "other". Declared names
# (--event, and the guard-rails' own) always keep their label and take no slot.
MAX_EVENT_LABELS = 32
DROP_REASONS = ("rate_limited", "queue_full")


def user_hash(key: bytes) -> str:
    """What records and events keep of a sticky key: a short hash, never the key itself."""
    return hashlib.blake2b(key, digest_size=8, person=b"tokenpace-user").hexdigest()


class RecentRequests:
    """Bounded: request id -> (arm, upstream, user hash) for the newest ``capacity`` requests.

    Ids are the gateway's own. A client's own ``x-request-id`` is an alias, honoured only while it
    is unambiguous: a second request sending the same one (a client reusing another's id) makes it
    join nothing, so no client can move another's events to its own arm."""

    def __init__(self, capacity: int = 100_000) -> None:
        self.capacity = capacity
        self._map: OrderedDict[str, tuple[str, str, str | None]] = OrderedDict()
        self._aliases: OrderedDict[str, str | None] = OrderedDict()  # client id -> ours (None: reused)

    def add(self, request_id: str, arm: str, upstream: str, user: str | None, client_id: str = "") -> None:
        self._map[request_id] = (arm, upstream, user)
        if len(self._map) > self.capacity:
            self._map.popitem(last=False)
        if client_id:
            self._aliases[client_id] = None if client_id in self._aliases else request_id
            if len(self._aliases) > self.capacity:
                self._aliases.popitem(last=False)

    def get(self, request_id: str) -> tuple[str, str, str | None] | None:
        known = self._map.get(request_id)
        if known is None and (ours := self._aliases.get(request_id)) is not None:
            known = self._map.get(ours)
        return known

    def __len__(self) -> int:
        return len(self._map)


class EventMetrics:
    def __init__(self, registry: CollectorRegistry, declared: Iterable[str] = ()) -> None:
        self.events = Counter(
            EVENTS.removesuffix("_total"),
            'Business outcome events reported, by arm and event (arm="unknown": request id not known)',
            ("arm", "event"),
            registry=registry,
        )
        self.dropped = Counter(
            EVENTS_DROPPED.removesuffix("_total"),
            "Outcome events not kept: over a client's rate, or their queue full",
            ("reason",),
            registry=registry,
        )
        for reason in DROP_REASONS:
            self.dropped.labels(reason)
        self._declared = frozenset(declared)
        self._names: set[str] = set()  # undeclared names given a label of their own, first come

    def count(self, arm: str, event: str) -> None:
        if event in self._declared:
            self.events.labels(arm, event).inc()
            return
        if event not in self._names and len(self._names) < MAX_EVENT_LABELS:
            self._names.add(event)
        self.events.labels(arm, event if event in self._names else "other").inc()


async def _read_bounded(request: web.Request, limit: int) -> bytes | None:
    """The whole body (chunked or not), or None as soon as it passes ``limit`` bytes."""
    chunks, size = [], 0
    while chunk := await request.content.read(64 * 1024):
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


class EventsPage:
    """The handler; ``route(user_key)`` -> (arm, upstream) is the router's sticky choice."""

    def __init__(
        self,
        recent: RecentRequests,
        route: Callable[[bytes], tuple[str, str]],
        put: Callable[[OutcomeEvent], None],
        metrics: EventMetrics,
        authorized: Callable[[web.Request], web.Response | None],
        body_timeout_s: float = 30.0,
        rate: ClientRate | None = None,
    ) -> None:
        self.rate = rate  # events per client address
        self.body_timeout_s = body_timeout_s
        self.recent = recent
        self.route = route
        self.put = put
        self.metrics = metrics
        self.authorized = authorized
        self.unknown = 0

    async def post(self, request: web.Request) -> web.Response:
        refused = self.authorized(request)
        if refused is not None:
            return refused
        if request.content_length is not None and request.content_length > MAX_EVENTS_BODY:
            resp = errors.too_large(MAX_EVENTS_BODY)
            resp.force_close()
            return resp
        try:
            body = await asyncio.wait_for(_read_bounded(request, MAX_EVENTS_BODY), self.body_timeout_s)
        except asyncio.TimeoutError:
            resp = errors.error_response(408, "request body too slow", "invalid_request_error", "timeout")
        except (HttpProcessingError, ConnectionError):  # a broken body: one short answer
            resp = errors.bad_request("incomplete request body")
        else:
            if body is not None:
                return self._accept(body, request.remote or "")
            resp = errors.too_large(MAX_EVENTS_BODY)
        resp.force_close()  # the rest of the body is unread: this connection is done
        return resp

    def _accept(self, body: bytes, client: str) -> web.Response:
        try:
            inputs = parse_events(orjson.loads(body))
        except orjson.JSONDecodeError:
            return errors.bad_request("body is not valid JSON")
        except EventError as exc:
            return errors.bad_request(str(exc))
        if self.rate is not None and not self.rate.take(client, len(inputs)):
            self.metrics.dropped.labels("rate_limited").inc(len(inputs))
            resp = errors.error_response(
                429, "too many events from this client; retry later", "rate_limit_error", "rate_limited"
            )
            resp.headers["Retry-After"] = "1"
            return resp
        now = time.time()
        unknown = 0
        for item in inputs:
            event = self.join(item, now)
            unknown += event.arm == UNKNOWN_ARM
            self.metrics.count(event.arm, event.event)
            self.put(event)
        self.unknown += unknown
        return web.json_response({"accepted": len(inputs), "unknown_request_ids": unknown})

    def join(self, item: EventInput, now: float) -> OutcomeEvent:
        arm, upstream, user = UNKNOWN_ARM, None, None
        if item.request_id is not None:
            known = self.recent.get(item.request_id)
            if known is not None:
                arm, upstream, user = known
        if item.user_id is not None:
            user = user_hash(raw(item.user_id))
            if item.request_id is None:
                arm, upstream = self.route(raw(item.user_id))
        return OutcomeEvent(item.event, arm, now, item.request_id, user, upstream, item.value)
