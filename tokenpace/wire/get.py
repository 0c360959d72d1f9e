"""One small GET on tokenpace's own HTTP/1.1 kernel, for what a run asks before any load (the
model list). aiohttp would do, but importing it costs about a fifth of a second of CPU in every run,
which a short benchmark would count against itself."""

from __future__ import annotations

import asyncio
import ssl

from tokenpace.wire.dial import dial
from tokenpace.wire.endpoint import Endpoint
from tokenpace.wire.exchange import Exchange
from tokenpace.wire.request import request_bytes, request_head

MAX_BODY_BYTES = 8 * 1024 * 1024  # a model list is kilobytes; a hostile server gets cut here


class GetError(Exception):
    """The server could not be reached (``reached`` False) or answered in a way HTTP cannot read."""

    def __init__(self, message: str, reached: bool) -> None:
        super().__init__(message)
        self.reached = reached


class _Body:
    """The answer's body (tokenpace.wire.exchange.Reader), up to MAX_BODY_BYTES."""

    def __init__(self) -> None:
        self.exchange = Exchange(asyncio.get_running_loop(), self)
        self.parts: list[bytes] = []
        self.size = 0
        self.error: str | None = None

    def on_head(self, ex: Exchange, now: int) -> None:
        pass

    def on_body(self, data: bytes, now: int) -> None:
        self.size += len(data)
        if self.size > MAX_BODY_BYTES:
            self.error = self.error or f"answer over {MAX_BODY_BYTES // (1024 * 1024)} MiB"
            self.exchange.give_up()
        else:
            self.parts.append(data)

    def on_end(self, now: int) -> None:
        pass

    def on_failed(self, reason: str, now: int, lost: bool) -> None:
        self.error = self.error or reason
        self.exchange.give_up()


async def http_get(
    endpoint: Endpoint,
    path: str,
    headers: dict[str, str],
    timeout_s: float,
    ssl_context: ssl.SSLContext | None = None,
) -> tuple[int, bytes]:
    """(status, body) of ``GET path``; asyncio.TimeoutError past ``timeout_s``; GetError otherwise."""
    return await asyncio.wait_for(_get(endpoint, path, headers, ssl_context), timeout_s)


async def _get(
    endpoint: Endpoint, path: str, headers: dict[str, str], ssl_context: ssl.SSLContext | None
) -> tuple[int, bytes]:
    tls = ssl_context if ssl_context is not None else endpoint.ssl_context()
    try:
        conn, _ = await dial(endpoint.host, endpoint.port, tls)
    except ssl.SSLCertVerificationError as exc:
        raise GetError(f"certificate verify failed: {exc.verify_message}", reached=False) from None
    except ssl.SSLError as exc:
        raise GetError(f"TLS handshake failed: {exc.reason or exc}", reached=False) from None
    except OSError as exc:
        raise GetError(str(exc.strerror or exc), reached=False) from None
    answer = _Body()
    fields = [("Accept", "application/json"), *headers.items(), ("Connection", "close")]
    try:
        head = request_head("GET", path, endpoint.host_header, fields)
        conn.start(answer.exchange, request_bytes(head, None))
        await answer.exchange.done
    finally:
        conn.close()
    if answer.error is not None:
        raise GetError(answer.error, reached=True)
    return answer.exchange.status, b"".join(answer.parts)
