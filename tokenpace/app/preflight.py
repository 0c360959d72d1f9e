"""Before any load: is the endpoint there, and which model does it serve?"""

from __future__ import annotations

import asyncio
import ssl

from tokenpace.client import Endpoint


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
    import aiohttp  # here, not at import: it costs a fifth of a second of start-up

    url = f"{endpoint.scheme}://{endpoint.host_header}{endpoint.base_path}/models"
    if endpoint.base_path.endswith(("/chat/completions", "/completions")):
        url = url.rsplit("/completions", 1)[0].rsplit("/chat", 1)[0] + "/models"
    if endpoint.query:
        url += "?" + endpoint.query
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout_s)) as session,
            session.get(url, headers=headers, ssl=ssl_context if ssl_context is not None else True) as resp,
        ):
            status = resp.status
            data = await resp.json(content_type=None) if status == 200 else None
    except asyncio.TimeoutError:
        raise PreflightError(f"{endpoint.url} did not answer within {timeout_s:g}s") from None
    except aiohttp.ClientConnectorError as exc:
        raise PreflightError(f"cannot reach {endpoint.url}: {exc.os_error or exc}") from None
    except aiohttp.ClientError as exc:
        raise PreflightError(f"cannot talk to {endpoint.url}: {exc}") from None
    except ValueError:
        data = None
        status = 200
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
