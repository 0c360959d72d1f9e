"""Before any load: is the endpoint there, and which model does it serve?"""

from __future__ import annotations

import asyncio
import ssl

import orjson

from tokenpace.wire.dialects import api_root
from tokenpace.wire.endpoint import Endpoint
from tokenpace.wire.get import GetError, http_get


class PreflightError(Exception):
    """The endpoint cannot be benchmarked as given; the message is for the user."""


async def resolve_model(
    endpoint: Endpoint,
    model: str | None,
    headers: dict[str, str],
    timeout_s: float = 10.0,
    ssl_context: ssl.SSLContext | None = None,
) -> tuple[str, list[str]]:
    """Check the server answers and pick the model: the one given, else the first it lists."""
    path = api_root(endpoint.base_path) + "/models"
    if endpoint.query:
        path += "?" + endpoint.query
    url = f"{endpoint.scheme}://{endpoint.host_header}{path}"
    try:
        status, body = await http_get(endpoint, path, headers, timeout_s, ssl_context)
    except asyncio.TimeoutError:
        raise PreflightError(f"{endpoint.url} did not answer within {timeout_s:g}s") from None
    except GetError as exc:
        what = "talk to" if exc.reached else "reach"
        raise PreflightError(f"cannot {what} {endpoint.url}: {exc}") from None
    try:
        data = orjson.loads(body) if status == 200 else None
    except orjson.JSONDecodeError:
        data = None
    if status in (401, 403):
        raise PreflightError(f"{url} answered HTTP {status}: check --api-key / OPENAI_API_KEY")
    models: list[str] = []
    if isinstance(data, dict):
        models = [str(m["id"]) for m in data.get("data") or [] if isinstance(m, dict) and m.get("id")]
    if model:
        return model, models
    if models:
        return models[0], models
    if status == 404 and "/v1" not in endpoint.base_path:
        raise PreflightError(
            f"{url} answered HTTP 404: the URL {endpoint.url} probably lacks /v1 "
            f"(try {endpoint.url.rstrip('/')}/v1)"
        )
    raise PreflightError(f"no --model given and {url} lists none (HTTP {status}); pass --model NAME")


async def resolve_model_when_ready(
    endpoint: Endpoint,
    model: str | None,
    headers: dict[str, str],
    wait_s: float,
    ssl_context: ssl.SSLContext | None = None,
) -> tuple[str, list[str]]:
    """``resolve_model``, asked again every second until it succeeds or ``wait_s`` has passed (a
    server still loading its model; vLLM's --ready-check-timeout-sec)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait_s
    while True:
        try:
            return await resolve_model(endpoint, model, headers, ssl_context=ssl_context)
        except PreflightError:
            left = deadline - loop.time()
            if left <= 0:
                raise
            await asyncio.sleep(min(1.0, left))
