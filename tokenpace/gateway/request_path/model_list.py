"""The models an upstream lists at ``/v1/models``: configured models, whose metric label no client
can take away (see prom.ModelLabels). Asked once, in the background, when half the overflow slots
are taken; an upstream that does not answer leaves its models to compete for them like any name."""

from __future__ import annotations

import asyncio
import contextlib

import orjson

from tokenpace.gateway.config.config import Upstream
from tokenpace.wire.endpoint import parse_endpoint
from tokenpace.wire.get import GetError, http_get

MAX_LISTED = 256  # names taken from one upstream's list (each becomes a label value)
MAX_NAME = 128  # longer ids are not label material
TIMEOUT_S = 5.0


async def listed_models(upstream: Upstream, timeout_s: float = TIMEOUT_S) -> list[str]:
    """The model ids the upstream lists (at most MAX_LISTED); [] when it cannot say."""
    headers = {"Authorization": upstream.auth} if upstream.auth else {}
    with contextlib.suppress(GetError, asyncio.TimeoutError, OSError, ValueError):
        endpoint = parse_endpoint(upstream.origin)
        status, body = await http_get(endpoint, upstream.base_path + "/v1/models", headers, timeout_s)
        if status == 200:
            return model_ids(orjson.loads(body))
    return []


def model_ids(listing: object) -> list[str]:
    """The ``data[].id`` of an OpenAI model list, odd entries skipped."""
    data = listing.get("data") if isinstance(listing, dict) else None
    if not isinstance(data, list):
        return []
    ids = [m["id"] for m in data if isinstance(m, dict) and isinstance(m.get("id"), str)]
    return [i for i in ids if 0 < len(i) <= MAX_NAME][:MAX_LISTED]
