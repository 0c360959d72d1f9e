"""Opening a connection in timed phases: DNS lookup, TCP connect, TLS handshake.

asyncio's create_connection does all three in one call; done apart, each phase gets its own
timestamp, so a slow TTFT on a cold connection can be blamed on the right hop.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from dataclasses import dataclass
from time import perf_counter_ns
from typing import Any

from tokenpace.wire.connection import HttpConnection


@dataclass(slots=True)
class DialTimes:
    dns_ns: int
    tcp_ns: int
    tls_ns: int | None  # None for plain HTTP


AddrInfo = tuple[Any, Any, int, str, Any]  # (family, type, proto, canonname, address)


def _literal(host: str, port: int) -> list[AddrInfo] | None:
    """An IP address needs no lookup (and no trip through the resolver's thread pool)."""
    for family, address in ((socket.AF_INET, (host, port)), (socket.AF_INET6, (host, port, 0, 0))):
        try:
            socket.inet_pton(family, host)
        except OSError:
            continue
        return [(family, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", address)]
    return None


class Resolver:
    """Addresses for new connections. An IP address is used as it is; concurrent lookups of one host
    share a single getaddrinfo, so a burst of new connections (a closed loop's first wave) waits for
    one lookup instead of queueing hundreds through the resolver's few threads. Nothing is cached
    past the lookup: a later new connection looks the name up again, and its DNS phase says so."""

    def __init__(self) -> None:
        self._pending: dict[tuple[str, int], asyncio.Future[Any]] = {}

    async def resolve(self, host: str, port: int) -> list[AddrInfo]:
        literal = _literal(host, port)
        if literal is not None:
            return literal
        key = (host, port)
        pending = self._pending.get(key)
        if pending is None:
            loop = asyncio.get_running_loop()
            pending = asyncio.ensure_future(
                loop.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
            )
            self._pending[key] = pending
            pending.add_done_callback(lambda _: self._pending.pop(key, None))
        return await asyncio.shield(pending)


async def dial(
    host: str, port: int, ssl_context: ssl.SSLContext | None, resolver: Resolver | None = None
) -> tuple[HttpConnection, DialTimes]:
    """Open a connection; raises socket.gaierror, OSError or ssl.SSLError like create_connection."""
    t0 = perf_counter_ns()
    # An IP address is looked at here, without a coroutine of its own: a closed loop's first wave
    # dials hundreds at once, and every frame between it and the event loop is resumed each time.
    infos = _literal(host, port) or await (resolver or Resolver()).resolve(host, port)
    t1 = perf_counter_ns()
    last_error: OSError | None = None
    loop = asyncio.get_running_loop()
    for family, _, _, _, address in infos:  # first address that accepts, as browsers do
        try:
            if ssl_context is None:
                # TCP in one step of the event loop's own C path (a burst of hundreds of new
                # connections costs half the loop time of a separate connect and protocol set-up).
                # asyncio and uvloop both set TCP_NODELAY on the transports they create (one
                # chunk, one segment): no call of ours.
                _, conn = await loop.create_connection(
                    HttpConnection, host=address[0], port=address[1], family=family, proto=socket.IPPROTO_TCP
                )
                return conn, DialTimes(t1 - t0, perf_counter_ns() - t1, None)
            return await _tls(family, address, host, ssl_context, t0, t1)
        except OSError as exc:
            if isinstance(exc, ssl.SSLError):
                raise
            last_error = exc
    raise last_error or OSError(f"no address for {host}")


async def _tls(
    family: int, address: Any, host: str, ssl_context: ssl.SSLContext, t0: int, t1: int
) -> tuple[HttpConnection, DialTimes]:
    """TCP connect, then the TLS handshake on it: two steps, so each phase has its own time."""
    loop = asyncio.get_running_loop()
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setblocking(False)
    try:
        await loop.sock_connect(sock, address)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # one chunk, one segment
        t2 = perf_counter_ns()
        _, conn = await loop.create_connection(
            HttpConnection, sock=sock, ssl=ssl_context, server_hostname=host
        )
    except BaseException:
        sock.close()
        raise
    return conn, DialTimes(t1 - t0, t2 - t1, perf_counter_ns() - t2)
