"""OpenAI-style error responses the gateway itself produces (it never rewrites an upstream's)."""

from __future__ import annotations

import orjson
from aiohttp import web

from tokenpace.gateway.messages.heads import REQUEST_ID


def error_response(status: int, message: str, kind: str, code: str | None = None) -> web.Response:
    body = {"error": {"message": message, "type": kind, "param": None, "code": code}}
    return web.Response(status=status, body=orjson.dumps(body), content_type="application/json")


def bad_request(message: str) -> web.Response:
    return error_response(400, message, "invalid_request_error", "invalid_json")


def too_large(limit: int) -> web.Response:
    return error_response(
        413, f"request body larger than {limit} bytes", "invalid_request_error", "request_too_large"
    )


def bad_gateway(upstream: str) -> web.Response:
    # The reason stays in the record; the client learns only which upstream, not its address.
    return error_response(502, f"upstream {upstream!r} is unreachable", "upstream_error", "bad_gateway")


def gateway_timeout(upstream: str) -> web.Response:
    return error_response(
        504, f"upstream {upstream!r} sent no first token in time", "upstream_error", "gateway_timeout"
    )


def unauthorized(message: str = "missing or invalid gateway key (Authorization: Bearer KEY)") -> web.Response:
    resp = error_response(401, message, "invalid_request_error", "invalid_api_key")
    resp.headers["WWW-Authenticate"] = "Bearer"
    return resp


def busy(message: str) -> web.Response:
    """503 with Retry-After: the gateway cannot take this now; the same request may succeed later."""
    resp = error_response(503, message, "server_error", "overloaded")
    resp.headers["Retry-After"] = "1"
    return resp


def no_upstream_answer(timed_out: bool, upstream: str, request_id: str | None) -> web.Response:
    """The upstream gave no response head: 504 when it timed out, else 502; with our request id
    (the one events are reported against) when the request has a record."""
    resp = gateway_timeout(upstream) if timed_out else bad_gateway(upstream)
    if request_id is not None:
        resp.headers[REQUEST_ID] = request_id
    return resp


def compressed_body() -> web.Response:
    """A compressed body to a measured API: its JSON is read, and the gateway inflates no request."""
    return error_response(
        415, "compressed request bodies are not accepted", "invalid_request_error", "unsupported_encoding"
    )
