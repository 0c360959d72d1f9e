"""What the proxy sends and answers around the body: the upstream request (the client's headers
less hop-by-hop ones, with the upstream's credentials), the client's response head, and the outcome
a complete body leaves."""

from __future__ import annotations

from aiohttp import web

from tokenpace.core.record import RequestRecord
from tokenpace.gateway.config.config import Upstream
from tokenpace.gateway.metering.budget import Budget
from tokenpace.gateway.metering.meter import Meter
from tokenpace.gateway.metering.outcome import Outcome
from tokenpace.wire.connection import HttpConnection
from tokenpace.wire.dialects.base import Dialect
from tokenpace.wire.exchange import Exchange
from tokenpace.wire.request import request_bytes, request_head

# Hop-by-hop headers (RFC 9110 7.6.1) and those aiohttp sets itself; everything else passes through.
HOP = frozenset(
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

# Always ours: events join on it, so a client reusing another's id cannot move that client's
# events to its own arm. The client's own id is kept apart (label CLIENT_REQUEST_ID) for its logs,
# and joins events only while no other request sent it too (events.RecentRequests).
HOP_AND_AUTH = HOP | {"authorization"}
REQUEST_ID = "x-request-id"
CLIENT_REQUEST_ID = "client_request_id"
UPSTREAM_REQUEST_ID = "x-upstream-request-id"
_WITH_BODY = ("POST", "PUT", "PATCH")  # methods that say their (even empty) body's length


def upstream_headers(request: web.Request, upstream: Upstream, client_keys: bool) -> list[tuple[str, str]]:
    """The client's headers less hop-by-hop ones, with the upstream's credentials. With client keys
    the client's Authorization is the gateway's own key: never sent on."""
    hop = HOP_AND_AUTH if client_keys else HOP
    headers = [(k, v) for k, v in request.headers.items() if k.lower() not in hop]
    if upstream.auth is not None and (client_keys or "Authorization" not in request.headers):
        headers.append(("Authorization", upstream.auth))  # key_env=/key_file=, or the URL's
    return headers


def upstream_request(
    request: web.Request, body: bytes, headers: list[tuple[str, str]], upstream: Upstream, host: str
) -> bytes:
    """The request's bytes for the upstream (``headers`` from ``upstream_headers``)."""
    target = upstream.base_path + request.rel_url.raw_path_qs
    head = request_head(request.method, target, host, headers)
    return request_bytes(head, body if body or request.method in _WITH_BODY else None)


def stream_outcome(meter: Meter) -> tuple[Outcome, str | None]:
    rec = meter.record
    if rec.http_status is not None and rec.http_status >= 300:
        return Outcome.HTTP_ERROR, f"HTTP {rec.http_status}"
    if meter.error is not None:
        return Outcome.UPSTREAM_ABORT_MID_STREAM, meter.error
    if not meter.finish_stream_ok():
        return Outcome.UPSTREAM_ABORT_MID_STREAM, "stream ended before [DONE]"
    return Outcome.OK, None


def response_head(
    ex: Exchange,
    conn: HttpConnection,
    record: RequestRecord | None,
    dialect: Dialect | None,
    budget: Budget | None = None,
) -> tuple[web.StreamResponse, Meter | None]:
    """The client's response head (the upstream's, less hop-by-hop headers), and the meter of a
    generation request's successful body."""
    up_headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in ex.headers]
    meter = None
    if record is not None and dialect is not None:  # a record is made for a dialect's request only
        record.headers_ns, record.http_status = conn.now, ex.status
        if ex.status < 300:
            content_type = ex.content_type.decode("latin-1")
            meter = Meter(record, dialect, content_type, ex.encoding.decode("latin-1"))
            meter.budget = budget
    resp = web.StreamResponse(status=ex.status, reason=conn.reason.decode("latin-1") or None)
    for k, v in up_headers:
        lower = k.lower()
        if lower == REQUEST_ID and record is not None:
            resp.headers.add(UPSTREAM_REQUEST_ID, v)  # ours is the one events are reported against
        elif lower not in HOP:
            resp.headers.add(k, v)
    if record is not None:
        resp.headers[REQUEST_ID] = record.request_id
    if ex.length is not None and not ex.chunked:
        resp.content_length = ex.length
    return resp, meter
