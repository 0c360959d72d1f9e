"""One small GET on tokenpace's own HTTP/1.1 kernel, for what a run asks before any load (the
model list). aiohttp would do, but importing it costs about a fifth of a second of CPU in every run,
which a short benchmark would count against itself."""

from __future__ import annotations

import asyncio
import ssl
from dataclasses import dataclass, field

from tokenpace.wire.dial import dial
from tokenpace.wire.endpoint import Endpoint
from tokenpace.wire.request import request_bytes, request_head

MAX_BODY_BYTES = 8 * 1024 * 1024  # a model list is kilobytes; a hostile server gets cut here


class GetError(Exception):
    """The server could not be reached (``reached`` False) or answered in a way HTTP cannot read."""

    def __init__(self, message: str, reached: bool) -> None:
        super().__init__(message)
        self.reached = reached


@dataclass
class _Answer:
    done: asyncio.Future[None]
    status: int = 0
    body: list[bytes] = field(default_factory=list)
    size: int = 0
    error: str | None = None

    # --- tokenpace.wire.http1.client.ResponseHandler ---
    def response_header(self, name: bytes, low_name: bytes, value: bytes) -> None:
        pass

    def response_interim(self) -> None:
        pass

    def response_head(self, status: int, now: int) -> None:
        self.status = status

    def response_body(self, data: bytes, now: int) -> None:
        self.size += len(data)
        if self.size > MAX_BODY_BYTES:
            self._finish(f"answer over {MAX_BODY_BYTES // (1024 * 1024)} MiB")
        else:
            self.body.append(data)

    def response_end(self, now: int) -> None:
        self._finish(None)

    def response_lost(self, exc: Exception | None, now: int, body_ended: bool) -> None:
        self._finish(None if body_ended else f"connection closed ({type(exc).__name__ if exc else 'EOF'})")

    def response_malformed(self, reason: str, now: int) -> None:
        self._finish(reason)

    def _finish(self, error: str | None) -> None:
        if not self.done.done():
            self.error = error
            self.done.set_result(None)


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
    answer = _Answer(asyncio.get_running_loop().create_future())
    fields = [("Accept", "application/json"), *headers.items(), ("Connection", "close")]
    try:
        conn.start(answer, request_bytes(request_head("GET", path, endpoint.host_header, fields), None))
        await answer.done
    finally:
        conn.close()
    if answer.error is not None:
        raise GetError(answer.error, reached=True)
    return answer.status, b"".join(answer.body)
