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

from tokenpace.client.connection import HttpConnection


@dataclass(slots=True)
class DialTimes:
    dns_ns: int
    tcp_ns: int
    tls_ns: int | None  # None for plain HTTP


async def dial(host: str, port: int, ssl_context: ssl.SSLContext | None) -> tuple[HttpConnection, DialTimes]:
    """Open a connection; raises socket.gaierror, OSError or ssl.SSLError like create_connection."""
    loop = asyncio.get_running_loop()
    t0 = perf_counter_ns()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    t1 = perf_counter_ns()
    sock = None
    last_error: OSError | None = None
    for family, type_, proto, _, address in infos:  # first address that accepts, as browsers do
        sock = socket.socket(family, type_, proto)
        sock.setblocking(False)
        try:
            await loop.sock_connect(sock, address)
            break
        except OSError as exc:
            sock.close()
            sock = None
            last_error = exc
        except BaseException:
            sock.close()
            raise
    if sock is None:
        raise last_error or OSError(f"no address for {host}")
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # one chunk, one segment
    t2 = perf_counter_ns()
    try:
        _, conn = await loop.create_connection(
            HttpConnection,
            sock=sock,
            ssl=ssl_context,
            server_hostname=host if ssl_context is not None else None,
        )
    except BaseException:
        sock.close()
        raise
    t3 = perf_counter_ns()
    return conn, DialTimes(t1 - t0, t2 - t1, (t3 - t2) if ssl_context is not None else None)
