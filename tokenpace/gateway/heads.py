"""The client's side of a proxied response: the head it gets (the upstream's, less hop-by-hop
headers, with the gateway's request id), the meter of a generation's body, and the outcome of a
finished stream."""

from __future__ import annotations

from aiohttp import web

from tokenpace.core.record import RequestRecord
from tokenpace.gateway.config import Upstream
from tokenpace.gateway.meter import Meter
from tokenpace.gateway.outcome import Outcome
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


REQUEST_ID = "x-request-id"  # the client's own (bounded), else ours: events are reported against it
UPSTREAM_REQUEST_ID = "x-upstream-request-id"


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
    ex: Exchange, conn: HttpConnection, record: RequestRecord | None, dialect: Dialect | None
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


def header(headers: list[tuple[str, str]], name: str) -> str:
    for k, v in headers:
        if k.lower() == name:
            return v
    return ""


_WITH_BODY = ("POST", "PUT", "PATCH")  # methods that say their (even empty) body's length


def upstream_request(request: web.Request, body: bytes, upstream: Upstream, host: str) -> bytes:
    """The request's bytes for the upstream: the client's headers less hop-by-hop ones, and the
    upstream's own credentials (from its URL's user:password) when the client sent none."""
    headers = [(k, v) for k, v in request.headers.items() if k.lower() not in HOP]
    if upstream.auth is not None and "Authorization" not in request.headers:
        headers.append(("Authorization", upstream.auth))
    target = upstream.base_path + request.rel_url.raw_path_qs
    head = request_head(request.method, target, host, headers)
    return request_bytes(head, body if body or request.method in _WITH_BODY else None)
