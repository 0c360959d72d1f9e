"""A request's body read within the gateway's bounds (size, time, a body the client broke), or the
answer the gateway gives instead (counted by the listener's guard)."""

from __future__ import annotations

import asyncio

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from tokenpace.gateway.config.secrets import request_secrets
from tokenpace.gateway.messages import errors
from tokenpace.gateway.operations.guard import Guard


async def read_body(request: web.Request, limit: int, timeout_s: float, guard: Guard) -> bytes | web.Response:
    """The body, or the refusal to answer with (413, 408, 400)."""
    if request.content_length is not None and request.content_length > limit:
        return refused(guard, request, "body_too_large", errors.too_large(limit))
    try:
        if request.content.is_eof():  # the whole body came with the head: no timer, no task
            return await request.read()
        return await asyncio.wait_for(request.read(), timeout_s)
    except web.HTTPRequestEntityTooLarge:
        return refused(guard, request, "body_too_large", errors.too_large(limit))
    except asyncio.TimeoutError:
        guard.closed("body_timeout", request.remote)
        resp = errors.error_response(408, "request body too slow", "invalid_request_error", "timeout")
        resp.force_close()
        return resp
    except (HttpProcessingError, ConnectionError):
        resp = errors.bad_request("incomplete or malformed request body")
        resp.force_close()
        return refused(guard, request, "body_incomplete", resp)


def refused(guard: Guard, request: web.Request, reason: str, resp: web.Response) -> web.Response:
    guard.rejected(reason, request.remote, resp.status)
    return resp


def compressed(request: web.Request) -> bool:
    """The body carries a Content-Encoding (aiohttp's own inflating is off: it is never inflated)."""
    return request.headers.get("Content-Encoding", "identity").strip().lower() != "identity"


def carried(request: web.Request) -> tuple[str, ...]:
    """The credentials this request carried (scrubbed by value from its record)."""
    url = request.url
    userinfo = f"{url.raw_user}:{url.raw_password or ''}" if url.raw_user else ""
    return request_secrets(request.headers, request.query_string, userinfo)
